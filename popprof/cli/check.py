"""``popprof check`` (run the rule checks) and ``popprof rules`` (list them)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..io.progress import progress
from ..model.errors import UsageError
from .common import (
    FIGURES_ONLY,
    check_output,
    config_option,
    device_map_inputs,
    echo_json,
    emit,
    format_option,
    global_options,
    is_stdout,
    load_config_file,
    load_profiles,
    output_option,
    reader_options,
    reading_options,
    reads_arguments,
    require_inputs,
    shapes_option,
    start_reading,
    text_width,
)

if TYPE_CHECKING:
    from ..io.config import Config

FAIL_CHOICES = ("info", "warning", "error", "never")


def _fail_on(option: str | None, config: Config) -> str:
    if option is not None:
        return option
    value = "error" if config.fail_on is None else config.fail_on
    if value not in FAIL_CHOICES:
        raise UsageError(
            f"bad rules.fail_on {value!r} in the config; expected one of {', '.join(FAIL_CHOICES)}"
        )
    return str(value)


@click.command("check")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--rule",
    "rules",
    multiple=True,
    metavar="ID",
    help="Run only this rule (repeatable; globs like 'memory.*' and family names like 'host' work).",
)
@click.option("--skip", multiple=True, metavar="ID", help="Do not run this rule (repeatable; globs work).")
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="RULE.PARAM=VALUE",
    help="Override a rule parameter, e.g. --set memory.headroom.warning=0.8 (repeatable; 80% works).",
)
@config_option()
@format_option("text", "json", "markdown", "junit")
@click.option(
    "--fail-on",
    type=click.Choice(FAIL_CHOICES),
    default=None,
    help="Exit 1 when a finding is at or above this severity  [default: error, or rules.fail_on].",
)
@output_option("the report")
@click.option(
    "--show-skipped",
    is_flag=True,
    help="Text: list each rule that was not evaluated (default: one line per profile naming them).",
)
@click.option(
    "--full",
    is_flag=True,
    help="Text on a terminal: every message and piece of advice whole (piped text always is).",
)
@shapes_option()
@reading_options(engine=True)
def check_command(
    paths: tuple[Path, ...],
    rules: tuple[str, ...],
    skip: tuple[str, ...],
    sets: tuple[str, ...],
    config_file: Path | None,
    fmt: str,
    fail_on: str | None,
    output: Path | None,
    show_skipped: bool,
    full: bool,
    engine: str | None,
    device_map: str | None,
    shapes: bool | None,
) -> None:
    """Flag memory peaks, exchange- or communication-heavy phases and host stalls.

    Each PATH is a profile, bundle, trace or run directory (a run directory
    gives one profile per engine). Rules whose tables a profile lacks are
    reported as "not evaluated". Exit 0 when no finding reaches --fail-on,
    1 when one does, 2 on bad input or usage.

    \b
    Examples:
      popprof check reports/
      popprof check profile.popprof --rule 'memory.*' --set memory.headroom.warning=0.8
      popprof check run/ --format junit -o findings.xml --fail-on warning
      popprof check trace.json.gz --rule host --format markdown
      popprof check trace.json.gz --no-shapes --rule host
    """
    require_inputs(*paths)  # before the rules' imports: a missing file is said at once
    from ..report.findings import RENDERERS, failed
    from ..rules import check, parse_set
    from ..rules.base import plan

    config = load_config_file(config_file)
    shapes = reads_arguments(paths, shapes)
    if len(paths) == 1:
        start_reading(paths[0], with_args=shapes, **FIGURES_ONLY)
    options = {"rules": list(rules) or None, "skip": list(skip), "params": parse_set(sets), "config": config}
    plan(**options)  # validate rules and parameters before reading any profile
    read_options = reader_options(
        device_map, config, with_args=shapes, **FIGURES_ONLY
    )  # ... and the device map
    check_output(output, [*paths, config_file, *device_map_inputs(device_map)])
    level = _fail_on(fail_on, config)

    results = []
    seen: dict[str, int] = {}
    with progress("checking", total=len(paths)) as advance:
        for path in paths:
            for name, profile in load_profiles(path, engine, **read_options).items():
                findings = check(profile, **options)
                seen[name] = seen.get(name, 0) + 1
                findings.profile_name = name if seen[name] == 1 else f"{name} #{seen[name]}"
                results.append(findings)
            advance(1)

    if fmt == "text":
        rich = is_stdout(output) and sys.stdout.isatty()
        text = RENDERERS["text"](
            results,
            level,
            rich=rich,
            width=text_width(terminal=rich),
            show_skipped=show_skipped,
            brief=rich and not full,
        )
    else:
        text = RENDERERS[fmt](results, level)
    emit(text, output)
    if failed(results, level):
        raise click.exceptions.Exit(1)


@click.command("rules")
@format_option("text", "json", "markdown")
@output_option("the list")
@config_option()
@global_options
def rules_command(fmt: str, output: Path | None, config_file: Path | None) -> None:
    """List the rules with what they need, their parameters and defaults.

    With a configuration (--config FILE, else the nearest popprof.toml or
    pyproject.toml), the parameters shown are the ones `popprof check` would
    use, and rules the configuration turns off are marked.

    \b
    Examples:
      popprof rules
      popprof rules --format json -o rules.json
      popprof rules --config ci/popprof.toml
    """
    from ..rules import RULES
    from ..rules.base import plan

    check_output(output, [config_file])
    selected, params = plan(config=load_config_file(config_file))
    enabled = {r.id for r in selected}
    if fmt == "json":
        echo_json(
            [
                {
                    "id": r.id,
                    "description": r.description,
                    "needs": [list(a) for a in r.needs],
                    "params": params[r.id],
                    "defaults": r.params,
                    "enabled": r.id in enabled,
                    "advice": r.advice,
                    "advice_by_platform": r.advice_by_platform,
                }
                for r in RULES.values()
            ],
            output,
        )
        return
    off = {rid: "" if rid in enabled else " (off in the config)" for rid in RULES}
    if fmt == "markdown":
        from ..report import markdown as md

        rows = [
            [
                md.code(r.id) + off[r.id],
                md.cell(r.description),
                md.cell(r.needs_text()),
                ", ".join(md.code(f"{k}={v}") for k, v in params[r.id].items()) or "none",
            ]
            for r in RULES.values()
        ]
        table = md.table(["rule", "description", "needs", "parameters"], rows)
        emit("\n".join(table) + "\n", output)
        return
    if is_stdout(output) and sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table

        table = Table(show_lines=True)
        for col in ("rule", "description", "needs", "parameters"):
            table.add_column(col)
        for r in RULES.values():
            table.add_row(
                r.id + off[r.id],
                r.description,
                r.needs_text(),
                "\n".join(f"{k} = {v}" for k, v in params[r.id].items()) or "-",
            )
        Console().print(table)
        return
    from ..report.findings import wrap_text
    from ..report.fit import HANG, fit_lines

    width = text_width(terminal=False)  # a terminal gets the table above: this is a pipe or a file
    lines = []
    for r in RULES.values():  # the rule, whether the config turns it off, then its description, wrapped
        lines += wrap_text(r.description, width, f"{r.id}{off[r.id]}: ", HANG)
        lines += fit_lines([f"  needs: {r.needs_text()}"], width)
        lines += fit_lines((f"  {r.id}.{key} = {value}" for key, value in params[r.id].items()), width)
    emit("\n".join(lines) + "\n", output)
