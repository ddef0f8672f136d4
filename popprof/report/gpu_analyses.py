"""The summary's GPU analyses as terminal text: collectives across ranks, kernel launch overhead, GPU time by
annotation.

Formats what :func:`popprof.metrics.summary.summarise` holds under ``collectives``
(:func:`popprof.metrics.collectives.collectives_section`), ``launches``
(:func:`popprof.metrics.launches.launches_section`) and ``trace.gpu_annotations``
(:func:`popprof.metrics.annotations.annotation_records`); nothing here computes a figure. Every line fits 80
columns: names are shortened, notes wrapped.
"""

from __future__ import annotations

from ..io import units
from ..io.names import short_names
from ..io.plural import plural
from ..metrics.account import PART_WORDS
from ..metrics.launches import SHORT_GAP_US
from .findings import wrap_text
from .fit import named_rows

#: The width every line keeps to.
WIDTH = 80
#: Width of a collective's type in its table.
TYPE_WIDTH = 16
#: Collective types the text lists (the JSON holds them all).
TEXT_COLLECTIVES = 8
#: Annotations the text lists of a one-rank trace, and per rank of several (the JSON holds them all).
TEXT_ANNOTATIONS = 8
TEXT_ANNOTATIONS_PER_RANK = 4
#: Ranks whose annotations the text lists (the JSON holds every rank).
TEXT_ANNOTATION_RANKS = 4
#: What the annotations' times are not (the text's note under them).
ANNOTATIONS_NEST = (
    "nested ranges, e.g. forward inside a ProfilerStep, overlap: the times do not add up to the device time"
)


def _wrapped(text: str, indent: str) -> list[str]:
    """``text`` wrapped to 80 columns as ``check`` text is, never inside a figure (``4.0 us``)."""
    return wrap_text(text, WIDTH, indent, indent + "  ")


def skew_share(row: dict) -> float | None:
    """A collective type's synchronisation skew over its time (None without time)."""
    return row["skew_us"] / row["time_us"] if row.get("time_us") else None


def render_collectives(doc: dict | None, shown: int = TEXT_COLLECTIVES, width: int = WIDTH) -> list[str]:
    """The collectives block: per type calls, time, synchronisation skew and its share, bus bandwidth; in
    fewer than its 71 columns each type's skew share and bus bandwidth go on a second line, under a header
    line of their own."""
    if not doc or not doc.get("by_type"):
        return []
    lines = ["", f"Collectives ({plural(doc['ranks'], 'rank')})"]
    lines += _wrapped(f"synchronisation skew {doc['skew']}", "  ")
    narrow = width < 71
    first = f"  {'type':<{TYPE_WIDTH}} {'calls':>7} {'time':>10} {'skew':>10}"
    second = f"{'skew %':>7} {'bus bandwidth':>14}"
    lines += [first, f"{'':29}{second}"] if narrow else [f"{first} {second}"]
    rows = doc["by_type"][:shown]
    for row, name in zip(rows, short_names((r["collective"] for r in rows), width=TYPE_WIDTH), strict=True):
        first = (
            f"  {name:<{TYPE_WIDTH}} {units.count(row['count']):>7} {units.duration(row['time_us']):>10} "
            f"{units.duration(row['skew_us']):>10}"
        )
        second = (
            f"{units.percent(skew_share(row), missing='-'):>7} "
            f"{units.bandwidth(row.get('busbw_gbps'), missing='-'):>14}"
        )
        lines += [first, f"{'':29}{second}"] if narrow else [f"{first} {second}"]
    if len(doc["by_type"]) > shown:
        lines.append(f"  ({len(doc['by_type']) - shown} more in --format json)")
    lines.append("  skew: waiting for the last rank to arrive; the rest of the time is transfer;")
    lines.append("  bus bandwidth: bytes x NCCL's factor / transfer time (nccl-tests' busbw)")
    if doc.get("bytes"):
        lines += _wrapped(f"message sizes {doc['bytes']} (--shapes reads them)", "  ")
    return lines


def render_launches(doc: dict | None) -> list[str]:
    """The kernel launch block: launches, launch delay median and p95, short kernels, launch-bound idle."""
    if not doc:
        return []
    cutoff = units.duration(doc["launch_delay_cutoff_us"])
    whose = "HTA's, the last ProfilerStep left out" if doc.get("last_step_left_out") else "HTA's"
    return [
        "",
        *_wrapped(
            f"Kernel launches ({whose}): {units.count(doc['count'])}, launch call time "
            f"{units.duration(doc['cpu_us'])}",
            "",
        ),
        f"  launch delay median {units.duration(doc['delay_median_us'])}, p95 "
        f"{units.duration(doc['delay_p95_us'])}; {units.count(doc['delay_outliers'])} over {cutoff}",
        f"  short kernels {units.count(doc['short_count'])}: "
        f"{units.duration(doc['short_gpu_us'])} on the device, {units.duration(doc['short_cpu_us'])} "
        "launching them",
        *_wrapped(
            f"launch-bound idle, every step (the account's {PART_WORDS['idle_launch']}, in gaps) "
            f"{units.duration(doc['launch_idle_us'])}, {units.duration(doc['short_launch_idle_us'])} of it "
            "before short kernels",
            "  ",
        ),
        *_wrapped(
            f"idle gaps under {units.duration(SHORT_GAP_US)} before short kernels, whole (host not submitting "
            f"+ launch or dependency; what a CUDA graph removes): {units.duration(doc['short_gaps_us'])}",
            "  ",
        ),
    ]


def render_gpu_annotations(
    rows: list[dict] | None, steps_left_out: bool = False, width: int = WIDTH
) -> list[str]:
    """The "GPU time by annotation" block: per rank (one heading each when there are several) the annotations
    with the most GPU time, their time, count and mean, largest first (``trace.gpu_annotations``)."""
    if not rows:
        return []
    ranks: dict[object, list[dict]] = {}
    for row in rows:
        ranks.setdefault(row.get("rank"), []).append(row)
    window = "; the last ProfilerStep left out" if steps_left_out else ""
    lines = ["", "  GPU time by annotation (HTA's user-annotation breakdown)"]
    lines += _wrapped(f"({ANNOTATIONS_NEST}{window})", "    ")
    lines.append(f"    {'time':>10}  {'count':>7}  {'mean':>10}  name")
    shown = TEXT_ANNOTATIONS if len(ranks) == 1 else TEXT_ANNOTATIONS_PER_RANK
    for rank, mine in list(ranks.items())[:TEXT_ANNOTATION_RANKS]:
        if len(ranks) > 1:
            lines.append(f"    rank {rank}")
        top = mine[:shown]
        lines += named_rows(
            [
                f"    {units.duration(r['sum_us']):>10}  {units.count(r['count']):>7}  "
                f"{units.duration(r['mean_us']):>10}  "
                for r in top
            ],
            (r["name"] for r in top),
            width,
        )
        if len(mine) > shown:
            lines.append(f"    ({len(mine) - shown} more in --format json)")
    if len(ranks) > TEXT_ANNOTATION_RANKS:
        lines.append(f"    ({len(ranks) - TEXT_ANNOTATION_RANKS} more ranks in --format json)")
    return lines
