"""``popprof summary``: the key figures of a profile."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .common import (
    FIGURES_ONLY,
    check_output,
    clean_for_json,
    critical_path_options,
    device_map_inputs,
    echo_json,
    emit,
    engine_option,
    format_option,
    is_stdout,
    kernel_sequence_options,
    load_config_file,
    load_profiles,
    output_option,
    reader_options,
    reading_options,
    reads_arguments,
    require_steps,
    shapes_option,
    start_reading,
    text_width,
    top_option,
)


@click.command("summary")
@click.argument("path", type=click.Path())
@engine_option()
@format_option("text", "json", "csv")
@top_option("Programs, kernels, events and threads")
@output_option()
@shapes_option()
@critical_path_options("Add each rank's critical path, and each step's on 2 or more steps")
@kernel_sequence_options()
@reading_options(config=True)
def summary_command(
    path: str,
    engine: str | None,
    fmt: str,
    top: int,
    output: Path | None,
    config_file: Path | None,
    device_map: str | None,
    shapes: bool | None,
    critical_path: bool,
    steps: tuple[int, int] | None,
    sequences: str | None,
    min_sequence_length: int,
) -> None:
    """Summarise a profile: target, memory, execution and trace figures.

    PATH is a profile.pop, a run directory, a bundle, a text summary,
    SDK 1.x JSON, a .pvti, a Chrome trace or a directory of per-rank
    Chrome traces (one profile with every rank). --format csv prints the
    per-device table (one row per profile, rank and device: busy, idle,
    compute, communication (IPU: all exchange), memory (GPU: copies; IPU:
    stream copies), overlap, host_wait (the host blocked on device)), the
    same columns for GPU traces and IPU profiles.

    \b
    Examples:
      popprof summary fixtures/mk2_training.popprof
      popprof summary run_dir/ --engine training --format json
      popprof summary traces_dir/ --format csv
      popprof summary trace.json.gz --no-shapes --format json
      popprof summary trace.json.gz --critical-path
      popprof summary trace.json.gz --critical-path --steps 4-5
      popprof summary trace.json.gz --kernel-sequences aten::conv2d
      popprof summary trace.json.gz --kernel-sequences aten::linear --min-sequence-length 2
    """
    critical_path = critical_path or steps is not None
    shapes = reads_arguments([path], shapes) or critical_path
    start_reading(
        path, with_args=shapes, **FIGURES_ONLY
    )  # first: the parse worker forks before the output check's imports
    check_output(output, [path, config_file, *device_map_inputs(device_map)])
    config = load_config_file(config_file)
    # the analyses' modules imported while the parse worker parses (half their 26 ms), not after the parse
    if fmt != "csv":
        from ..report.explain import explained_summary  # noqa: F401
    profiles = load_profiles(
        path, engine, **reader_options(device_map, config, with_args=shapes, **FIGURES_ONLY)
    )
    if fmt == "csv":
        from ..io.jsonout import times_to_the_nanosecond
        from ..metrics.devices import device_table

        emit(times_to_the_nanosecond(device_table(profiles.values())).to_csv(index=False), output)
        return
    from ..io.progress import progress
    from ..report.explain import explained_summary

    summaries = []
    # after the read's byte bar: a phase of its own, so a long analysis is not a full bar sitting still
    with progress(f"analysing {Path(path).name}", total=len(profiles)) as advance:
        for profile in profiles.values():
            require_steps(profile, steps)
            summaries.append(
                explained_summary(
                    profile,
                    top=top,
                    config=config,
                    critical_path=critical_path,
                    steps=steps,
                    kernel_sequences=sequences,
                    min_sequence_length=min_sequence_length,
                )
            )
            advance(1)
    if fmt == "json":
        echo_json(clean_for_json(summaries[0] if len(summaries) == 1 else summaries), output)
        return
    from ..report.summary import render_text

    width = text_width(terminal=is_stdout(output) and sys.stdout.isatty())
    emit("\n\n".join(render_text(s, width) for s in summaries) + "\n", output)
