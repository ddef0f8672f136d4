"""``popprof summary`` as terminal text: the figures of :func:`popprof.metrics.summary.summarise`, laid out.

Nothing here computes a figure; it formats what the summary document holds.
"""

from __future__ import annotations

from collections import Counter

from ..io import units, words
from ..io.names import NAME_WIDTH, operator_names, shape_words, short_names
from ..io.plural import plural
from ..trace.ids import SYNTHETIC_ID_BASE
from .explain import DEVICE_LINES, render_what_limits
from .fit import WIDTH, fit_lines, named_rows
from .gpu_analyses import render_collectives, render_gpu_annotations, render_launches
from .host_threads import render_host_cpu
from .ipu_analyses import render_fullest_tile, render_pipeline

# -- text rendering ---------------------------------------------------------


def _target_line(t: dict) -> str:
    """``ipu2 x 1: 1,472 tiles (1,472 per IPU), 624 KiB per tile, clock 1,330 MHz``, naming only what the
    source gives (an out-of-memory log gives the bytes per tile alone)."""
    head = f"{t.get('ipu_arch') or 'IPU'} x {units.count(t['num_ipus'])}: " if t.get("num_ipus") else ""
    if not head and t.get("ipu_arch"):
        head = f"{t['ipu_arch']}: "
    parts = []
    if t.get("num_tiles") is not None:
        per_ipu = (
            f" ({units.count(t['tiles_per_ipu'])} per IPU)" if t.get("tiles_per_ipu") is not None else ""
        )
        parts.append(f"{units.count(t['num_tiles'])} tiles{per_ipu}")
    if t.get("bytes_per_tile") is not None:
        parts.append(f"{units.nbytes(t['bytes_per_tile'])} per tile")
    if t.get("clock_hz"):
        parts.append(f"clock {t['clock_hz'] / 1e6:,.0f} MHz")
    return head + ", ".join(parts)


def render_text(summary: dict, width: int = WIDTH) -> str:
    """The summary as terminal text (plain; the CLI adds colour when on a terminal), no line wider than
    ``width`` (tables split, names moved under their figures, prose wrapped; every figure kept)."""
    lines = [f"Profile {summary['profile']} ({summary['source_format']})"]
    limits = render_what_limits(summary.get("what_limits"))
    if limits:
        lines += ["", *limits]
    t = summary.get("target")
    if t and any(t.get(k) is not None for k in ("num_ipus", "num_tiles", "bytes_per_tile", "clock_hz")):
        lines += ["", "Target", "  " + _target_line(t)]
        if t.get("poplar_version"):
            lines.append(f"  Poplar {t['poplar_version']}")
    g = summary.get("graph")
    if g:
        names = {
            "vertices": "vertices",
            "edges": "edges",
            "variables": "variables",
            "compute_sets": "compute sets",
        }
        lines += ["", "Graph", "  " + ", ".join(f"{units.count(v)} {names[k]}" for k, v in g.items())]
    m = summary.get("memory")
    if m:
        lines += ["", "Memory"]
        heading = len(lines)
        # a line per figure the source gives (an out-of-memory log gives no totals: no rows of n/a)
        if m.get("total_incl_gaps_bytes") is not None or m.get("total_excl_gaps_bytes") is not None:
            lines += [
                f"  total including gaps   {units.nbytes(m['total_incl_gaps_bytes'])}",
                f"  total excluding gaps   {units.nbytes(m['total_excl_gaps_bytes'])}   (gaps "
                f"{units.percent(m['gap_share'])})",
            ]
        tile = "" if m.get("max_tile") is None else f" on tile {m['max_tile']:,}"
        if m.get("max_tile_incl_gaps_bytes") is not None:
            share = m.get("max_tile_utilisation")  # unknown without the tile capacity (a fragment)
            lines.append(
                f"  fullest tile           {units.nbytes(m['max_tile_incl_gaps_bytes'])}{tile}"
                + ("" if share is None else f" = {units.percent(share)} of capacity")
            )
        if m.get("max_tile_headroom_bytes") is not None:
            lines.append(f"  headroom               {units.nbytes(m['max_tile_headroom_bytes'])}")
        failed = m.get("failed_compilations") or 0
        if failed > 1:
            lines.append(
                f"  failed compilations    {failed:,} (out of memory; each its own graph or attempt: "
                "figures per compilation, none across them)"
            )
        elif m.get("tiles_out_of_memory") is not None or failed:
            lines.append(f"  tiles out of memory    {units.count(m['tiles_out_of_memory'])}")
        for row in (m.get("out_of_memory") or [])[:20]:
            if row["tile"] is None or row["bytes_used"] is None:
                saved = f" (profile saved to {row['profile_path']})" if row.get("profile_path") else ""
                lines.append(
                    f"    compilation {row['compilation']}: {row.get('reason') or 'no tile named'}{saved}"
                )
                continue
            lines.append(
                f"    compilation {row['compilation']}: tile {row['tile']:,} needs {units.nbytes(row['bytes_used'])}"
                f" of {units.nbytes(row['capacity_bytes'])} (over by {units.nbytes(row['over_bytes'])})"
            )
        if len(m.get("out_of_memory") or []) > 20:
            lines.append(f"    ({len(m['out_of_memory']) - 20:,} more in --format json)")
        by_type = [row for row in m.get("by_data_type") or [] if row["bytes"]]
        if by_type:
            lines.append("  by data type (excluding gaps)")
            for row in sorted(by_type, key=lambda r: -r["bytes"])[:12]:
                lines.append(f"    {row['category']:<32} {units.nbytes(row['bytes'])}")
            if len(by_type) > 12:
                lines.append(f"    ({len(by_type) - 12} more in --format json)")
        if m.get("peak_liveness_bytes") is not None:
            lines.append(f"  always-live            {units.nbytes(m['always_live_bytes'])}")
            program = f" ({m['peak_liveness_program']})" if m.get("peak_liveness_program") else ""
            lines.append(
                f"  peak liveness          {units.nbytes(m['peak_liveness_bytes'])} at step "
                f"{m['peak_liveness_step']:,}{program}"
            )
        if len(lines) == heading:  # the source gives no memory figure (a job log's Target and Graph only)
            del lines[heading - 2 :]
    lines += render_fullest_tile(summary.get("fullest_tile"), width)
    e = summary.get("execution")
    if e and e.get("source") == "summary":
        lines += _render_execution_totals(e, width)
    elif e:
        time = "" if e.get("total_time_us") is None else f" = {units.duration(e['total_time_us'])}"
        lines += [
            "",
            "Execution",
            f"  {units.count(e['runs'])} runs, {units.count(e['steps'])} steps on {plural(e['ipus'], 'IPU')}; "
            f"busiest IPU {units.count(e['total_cycles'])} cycles{time}",
            "  cycles by category (summed over IPUs):",
        ]
        for cat, row in e["by_category"].items():
            if row["cycles"]:
                lines.append(
                    f"    {words.category_word(cat, words.IPU):<16} {units.count(row['cycles']):>16}  "
                    f"{units.percent(row['share']):>8}"
                )
        lines.append("  top programs:")
        lines += named_rows(
            [
                f"    {units.count(p['cycles']):>14}  {units.percent(p['share']):>7}  "
                f"{words.category_word(p['category'], words.IPU):<15} "
                for p in e["top_programs"]
            ],
            (p["program"] for p in e["top_programs"]),
            width,
        )
    lines += render_pipeline(summary.get("pipeline"))
    fmt, left_out = summary.get("source_format"), steps_left_out(summary)
    if summary.get("devices"):
        lines += render_device_table(
            summary["devices"], source_format=fmt, steps_left_out=left_out, width=width
        )
    if summary.get("iterations"):
        lines += render_iterations(summary["iterations"])
    tr = summary.get("trace")
    if tr:
        lines += render_trace_text(tr, words.platform_of_summary(summary), fmt, left_out, width)
    lines += render_roofline_device(summary.get("roofline_device"))
    lines += render_operations(
        summary.get("operations") or [],
        summary.get("operations_note"),
        coverage=summary.get("operations_coverage"),
        unit=accelerator((tr or {}).get("devices") or []),
        width=width,
    )
    lines += render_collectives(summary.get("collectives"), width=width)
    lines += render_launches(summary.get("launches"))
    absent = summary.get("absent_tables") or []
    if absent:
        lines += ["", "Not in this source: " + ", ".join(absent)]
    if summary.get("read_problems"):
        lines += ["", "Read with problems", *(f"  {text}" for text in summary["read_problems"].values())]
    return "\n".join(fit_lines(lines, width))


#: GPU operators the text summary shows (the JSON holds ``--top``)
TEXT_OPERATIONS = 5
#: below this share of the GPU work held by operators, the text says how much the table leaves out
COVERAGE_SAID = 0.9


def render_roofline_device(device: dict | None) -> list[str]:
    """One line: the device whose peaks the roofline reads, how it was named and its peak table row, or why it
    has none (:func:`popprof.metrics.peaks.device_section`); nothing when the trace names no device."""
    if not device:
        return []
    how = device["name"] + (" (named by its properties)" if device["named_by"] == "properties" else "")
    if device.get("peaks"):
        return ["", f"  Roofline device: {how}; peaks: {device['peaks']}"]
    return ["", f"  Roofline device: {how}; no peaks: {device.get('no_peaks')}"]


def render_operations(
    rows: list[dict],
    note: str | None = None,
    shown: int = TEXT_OPERATIONS,
    coverage: dict | None = None,
    unit: str = "GPU",
    width: int = WIDTH,
) -> list[str]:
    """The top GPU operators by device time, with achieved TFLOP/s, TB/s and roofline bound, in 80 columns;
    with ``coverage`` (:func:`popprof.metrics.operations.coverage`) under :data:`COVERAGE_SAID`, how much of
    the GPU work no operator launched. ``unit`` ``TPU`` (:func:`accelerator`): a TPU's HLO ops, from XLA's
    cost analysis (``docs/operations.md``)."""
    if not rows:
        return []
    tpu = unit == "TPU"
    lines = [
        "",
        "  Top TPU ops (device time; FLOPs and bytes: XLA's cost analysis)"
        if tpu
        else "  Top GPU operators (device time)",
        f"    {'total':>10}  {'count':>7}  {'TFLOP/s':>8}  {'TB/s':>7}  {'bound':<7} {'HLO op' if tpu else 'operator'}",
    ]
    rows = rows[:shown]
    # one operator on two rows (two input shapes): each row's shapes on a line of their own, under its name
    repeated = {n for n, k in Counter(r["name"] for r in rows).items() if k > 1}
    for row, name in zip(rows, operator_names((r["name"] for r in rows), width=28), strict=True):
        lines.append(
            f"    {units.duration(row['device_time_us']):>10}  {row['count']:>7,}  "
            f"{units.number(row['tflops'], missing='-'):>8}  {units.number(row['tbps'], missing='-'):>7}  "
            f"{row['bound'] or '-':<7} {name}"
        )
        shapes = shape_words(row.get("input_shapes"), width=21) if row["name"] in repeated else ""
        if shapes:  # under the name's column, or less deep when the width leaves it too little room
            lines.append(f"{'':{max(6, min(52, width - 7 - len(shapes)))}}inputs {shapes}")
    if note:
        lines.append(f"    {note}")
    if coverage and coverage["share"] < COVERAGE_SAID:
        replays = coverage["graph_launches"]
        replayed = "a captured graph" if replays == 1 else "captured graphs"
        why = (
            f": {plural(replays, 'graph launch', 'graph launches')} replayed {replayed}, whose operators are in"
            " the capture's trace"
            if replays
            else ""
        )
        lines.append(
            f"    operators launched {units.duration(coverage['operators_us'])} of the "
            f"{units.duration(coverage['work_us'])} of GPU work ({units.percent(coverage['share'])}); no operator "
            f"encloses the launch of the rest{why}"
        )
    return lines


def _render_execution_totals(e: dict, width: int = WIDTH) -> list[str]:
    time = "" if e.get("total_time_us") is None else f" (approx {units.duration(e['total_time_us'])})"
    lines = [
        "",
        "Execution (from the summary)",
        f"  total cycles           {units.count(e['total_cycles'])}{time}",
    ]
    if e.get("programs_executed"):
        lines.append("  programs executed      " + ", ".join(e["programs_executed"]))
    lines.append("  cycles by category (share of total cycles):")
    for cat, row in e["by_category"].items():
        cycles = (
            "not printed"
            if row["cycles"] is None
            else (f"{row['cycles']:,.1f}" if row["basis"] == "tile_average" else units.count(row["cycles"]))
        )
        basis = " tile average" if row["basis"] == "tile_average" else ""
        flag = "  (estimated)" if row["estimated"] else ""
        word = words.category_word(cat, words.IPU)
        lines.append(f"    {word:<22} {cycles:>16}  {units.percent(row['share']):>8}{basis}{flag}")
    lines.append(f"  all exchange + sync    {units.percent(e.get('exchange_share'))}")
    if e.get("top_vertex_types"):
        lines.append("  top vertex types:")
        lines += named_rows(
            [
                f"    {units.count(v['cycles']):>14}  {units.count(v['instances']):>10} instances  "
                for v in e["top_vertex_types"]
            ],
            (v["vertex_type"] for v in e["top_vertex_types"]),
            width,
        )
    return lines


# -- text -------------------------------------------------------------------------------------


def _who(row: dict) -> str:
    rank = "" if row.get("rank") is None else f"rank {row['rank']}  "
    # names as the trace wrote them, less blanks at their ends (Kineto names a GPU stream "stream 7 ")
    names = " / ".join(
        n.strip() for n in (row.get("process_name"), row.get("thread_name")) if n and n.strip()
    )
    # ids from SYNTHETIC_ID_BASE stand in for ids written as text: not in the file, their text is the name
    ids = [f"{k} {row[k]}" for k in ("pid", "tid") if row.get(k) is None or row[k] < SYNTHETIC_ID_BASE]
    return f"{rank}{' '.join(ids)}" + (f"  {names}" if names else "")


def render_copies(kinds: list[dict], width: int = WIDTH) -> list[str]:
    """The "Host-device copies" block: per device and copy kind (``metrics.copies``) the count (transfers: a TPU's
    copy-start and its copy-done once, said under the block where that differs from the ops), bytes, device
    time and achieved GB/s (bytes / time), 74 columns at most (a device label of up to 14 characters); more
    devices than "What limits this run" lists one by one: per kind over all of them (the JSON keeps each)."""
    if not kinds:
        return []
    lines = ["", f"  {words.COPIES_TITLE} (device time; GB/s = bytes / time)"]
    devices = {(k.get("rank"), k["device"]) for k in kinds}
    if len(devices) > DEVICE_LINES:
        from ..metrics.copies import pooled_copy_records

        kinds = [{**k, "device": f"{len(devices)} devices"} for k in pooled_copy_records(kinds)]
    previous = None
    for k in kinds:
        who = k["device"] if k.get("rank") is None else f"rank {k['rank']} {k['device']}"
        shown = who if who != previous else ""
        previous = who
        row = f"    {shown:<14} {k['kind']:<13} {k['count']:>7,} {units.bytes_short(k['bytes'], missing='-'):>10}"
        time = f"{units.duration(k['time_us']):>10} {units.bandwidth(k['gbps'], missing='-'):>11}"
        # narrower than the 74 columns of a row: its time and GB/s on the next line, in columns of their own
        lines += [f"{row} {time}"] if width >= 74 else [row, f"{'':33}{time}"]
    if any(k.get("bytes") is None for k in kinds):
        lines.append(f"    ({words.COPIES_NO_BYTES})")
    if any(k.get("ops", k["count"]) != k["count"] for k in kinds):
        lines.append(f"    ({words.COPIES_TRANSFERS})")
    return lines


def render_counters(section: dict | None, width: int = WIDTH) -> list[str]:
    """The "Hardware counters" block of a CUPTI range-profiler trace (``metrics.counters``): the kernels paired
    with their launch, the SASS FLOPs by precision and per top-level operator, largest first."""
    if not section:
        return []
    lines = ["", f"  Hardware counters (CUPTI range profiler, {section['kernels']:,} kernels)"]
    if not section.get("read"):
        return [*lines, "    not read: the trace was read without its events' args (--shapes reads them)"]
    lines.append(
        f"    {section['paired']:,} of {section['kernels']:,} kernels paired with their launch call (in launch "
        f"order, as HTA does); {plural(len(section['counters']), 'counter')} each (the JSON names them)"
    )
    flops = section.get("flops") or {}
    if any(v is not None for v in flops.values()):
        shown = ", ".join(f"{p} {units.rate((v or 0) / 1e9, 'GFLOP')}" for p, v in flops.items())
        lines.append(
            f"    SASS FLOP (CUDA cores; tensor-core work not counted): {shown}; by top-level operator:"
        )
        operators = section.get("operators") or []
        lines += named_rows(
            [
                f"    {units.rate((o.get('flops') or 0) / 1e9, 'GFLOP'):>14} {o['kernels']:>6,} kernels  "
                for o in operators
            ],
            (o["top_level_op"] or "(launch not paired)" for o in operators),
            width,
        )
    return lines


def render_device_memory(memory: list[dict]) -> list[str]:
    """The "Device memory" lines of a trace with allocator events (prose, wrapped by :func:`fit_lines`)."""
    if not memory:
        return []
    lines = ["", "  Device memory (PyTorch's allocator events, profile_memory=True)"]
    for m in memory:
        who = m["device"] if m.get("rank") is None else f"rank {m['rank']} {m['device']}"
        since = "" if m["basis"] == "allocator" else " since the trace began (its blocks less those freed)"
        where = f" in {m['peak_op']}" if m.get("peak_op") else ""
        reserved = (
            ""
            if m.get("peak_reserved_bytes") is None
            else f"; {units.bytes_short(m['peak_reserved_bytes'])} reserved"
        )
        if reserved and m.get("capacity_bytes"):  # how close the allocator came to the device's memory
            share = units.percent(m["peak_reserved_bytes"] / m["capacity_bytes"])
            reserved += f" ({share} of its {units.bytes_short(m['capacity_bytes'])})"
        text = (
            f"    {who}: peak {units.bytes_short(m['peak_allocated_bytes'])} allocated{since} at "
            f"{units.offset(m['peak_at_us'])}{where}{reserved}; {plural(m['allocations'], 'block')} allocated "
            f"({units.bytes_short(m['allocated_bytes'])}), {m['frees']:,} freed"
        )
        if m["basis"] == "allocator":
            text += (
                f"; in use {units.bytes_short(m['start_bytes'])} at the start, "
                f"{units.bytes_short(m['end_bytes'])} at the end"
            )
        lines.append(text)
        tops = ", ".join(
            f"{t['op']} {t['allocations']:,} x {units.bytes_short(t['allocated_bytes'])}"
            for t in m["top_ops"]
        )
        if tops:
            lines.append(f"      most allocated by: {tops}")
    return lines


def render_queue_lengths(section: dict | None, steps_left_out: bool = False) -> list[str]:
    """The trace section's queue lengths (``metrics/queue_length.py``), one line per device: the stream whose
    queue grew longest, its mean and maximum (HTA's statistics of the series' points), and the device's time
    blocked on a full queue, summed over its streams."""
    streams = (section or {}).get("streams") or []
    if not streams:
        return []
    whose = "HTA's, the last ProfilerStep left out" if steps_left_out else "HTA's"
    full = f"{section['max_queue_length']:,}"
    lines = [
        "",
        f"  {words.QUEUE_LENGTH.capitalize()} per stream (launched, not yet started; {whose}; full: {full})",
    ]
    devices: dict[tuple, list[dict]] = {}
    for s in streams:
        devices.setdefault((s.get("rank"), s["device"]), []).append(s)
    for (rank, device), mine in devices.items():
        top = max(mine, key=lambda s: (s["max"], s["launches"]))
        blocked = sum(s["blocked_us"] for s in mine)
        who = f"rank {rank} {device}" if rank is not None else device
        lines.append(
            f"    {who}: mean {top['mean']:.1f}, max {top['max']:,.0f} on stream {top['stream']}; "
            f"{words.FULL_QUEUE} {units.duration(blocked)}"
        )
    return lines


def render_critical_path(paths: list[dict] | None, width: int = WIDTH) -> list[str]:
    """The "Critical path" lines (``summary --critical-path``): per rank its length, the share of each part
    on it and what making each part free would take off it (prose, wrapped by :func:`fit_lines`), and a table
    of the names with the most time on it, with the same (fitted to ``width``)."""
    if paths is None:
        return []
    lines = ["", "  Critical path (HTA's model: the longest chain of dependent host and GPU work)"]
    if not paths:
        return [*lines, "    none: no GPU work with its launch call in the trace"]
    steps = words.steps_words(paths[0].get("steps"))
    if steps:
        lines.append(f"    (the work{steps} only: its host events and the GPU work they launched)")
    for p in paths:
        who = "" if p.get("rank") is None else f"rank {p['rank']}: "
        parts = ", ".join(
            f"{words.CRITICAL_PATH_WORDS[k]} {units.percent(share)}"
            for k, share in p["shares"].items()
            if share
        )
        lines.append(f"    {who}{units.duration(p['length_us'])}: {parts or 'no time on it'}")
        savings = ", ".join(
            f"{words.CRITICAL_PATH_WORDS[k]} {units.duration(us)}"
            for k, us in p["savings_us"].items()
            if p["shares"][k]
        )
        if savings:
            lines.append(f"      made free, each would shorten it by: {savings}")
        if p["top"]:
            lines.append("      longest on it (time on it, share, shorter by if free):")
            lines += named_rows(
                [
                    f"      {units.duration(t['us']):>10} {units.percent(t['share']):>7} "
                    f"{units.duration(t['saving_us']):>10}  "
                    for t in p["top"]
                ],
                (t["name"] for t in p["top"]),
                width,
                indent="        ",
            )
        notes = []
        if p.get("sync_events") == 0:
            notes.append(
                "no CUDA sync events in the trace (newer PyTorch records them: pytorch/pytorch#105187): the "
                "host's waits on the GPU are not joined to it"
            )
        if p.get("unresolved_syncs"):
            notes.append(f"{plural(p['unresolved_syncs'], 'event synchronisation')} not traced to their work")
        if p.get("clipped_edges"):
            notes.append(f"{plural(p['clipped_edges'], 'edge')} against the clock counted as 0")
        if notes:
            lines.append(f"      ({'; '.join(notes)})")
    return lines


def render_kernel_sequences(
    section: dict | None, steps_left_out: bool = False, width: int = WIDTH
) -> list[str]:
    """The "Kernel sequences" lines (``summary --kernel-sequences OP``): per rank, the most frequent patterns
    (:data:`popprof.report.explain.SEQUENCE_LINES`, HTA's top 5) with their count, summed GPU kernel time,
    summed operator (CPU) time and kernel count, then the pattern (HTA's ``"|"``-joined text, shortened to
    ``width``); how many more are in the JSON."""
    if section is None:
        return []
    from .explain import SEQUENCE_LINES

    operator, least = section["operator"], section["min_length"]
    lines = ["", f"  Kernel sequences under {operator!r} (HTA's; fusion candidates)"]
    if steps_left_out:
        lines.append("    (the last ProfilerStep left out, as HTA)")
    rows = section.get("rows") or []
    if not rows:
        return [*lines, f"    none: no call of it launched {least} or more kernels"]
    by_rank: dict[object, list[dict]] = {}
    for row in rows:
        by_rank.setdefault(row.get("rank"), []).append(row)
    lines.append(f"    {'count':>6}  {'GPU time':>10}  {'CPU time':>10}  {'kernels':>7}  operator|kernels")
    for rank, mine in by_rank.items():
        if len(by_rank) > 1 or (rank is not None and rank >= 0):
            lines.append(f"    rank {rank}: {plural(len(mine), 'pattern')}")
        shown = mine[:SEQUENCE_LINES]
        lines += named_rows(
            [
                f"    {r['count']:>6,}  {units.duration(r['gpu_us']):>10}  {units.duration(r['cpu_us']):>10}  "
                f"{r['kernels']:>7,}  "
                for r in shown
            ],
            (r["pattern"] for r in shown),
            width,
        )
        if len(mine) > len(shown):
            lines.append(
                f"      ({plural(len(mine) - len(shown), 'more pattern')}: JSON trace.kernel_sequences)"
            )
    return lines


#: How many steps of a rank "Critical path by step" lists (its longest, in step order; the JSON has every one).
STEP_LINES = 10


def render_critical_path_by_step(rows: list[dict] | None, width: int = WIDTH) -> list[str]:
    """The "Critical path by step" lines (``summary --critical-path`` on a trace of at least 2 profiler steps):
    per rank, each step's own path (``trace.critical_path_by_step``: as ``--steps N`` gives it), its length,
    its largest part with that part's share, and the name with the most time on it; ``*`` marks the rank's
    longest step. At most :data:`STEP_LINES` steps per rank, the longest."""
    if not rows:
        return []
    lines = ["", f"  {words.CRITICAL_PATH_BY_STEP} (each step's own path, as --steps N; * the longest)"]
    ranks: dict[object, list[dict]] = {}
    for row in rows:
        ranks.setdefault(row["rank"], []).append(row)
    for rank, mine in ranks.items():
        longest = max(mine, key=lambda r: r["length_us"])
        shown = sorted(mine, key=lambda r: -r["length_us"])[:STEP_LINES]
        shown.sort(key=lambda r: r["step"])
        who = "" if rank is None else f"rank {rank}"
        names = {r["top_name"] for r in mine}
        shared = len(names) == 1 and None not in names  # one name longest on every step's path: said once
        if shared:
            said = f"{who}{': ' if who else ''}longest on every step's path: {next(iter(names))}"
            lines += fit_lines([f"    {said}"], width)
        elif who:
            lines.append(f"    {who}")
        head = f"     {'step':>5}  {'length':>10}  {'largest part':<21}"
        prefixes = [
            f"    {'*' if r is longest else ' '}{r['step']:>5}  {units.duration(r['length_us']):>10}  "
            f"{_largest_part(r):<21}"
            for r in shown
        ]
        if shared:
            lines += [head.rstrip(), *(p.rstrip() for p in prefixes)]
        else:
            lines.append(f"{head}  longest on it")
            lines += named_rows(
                [f"{p}  " for p in prefixes], (r["top_name"] or "-" for r in shown), width, indent="        "
            )
        if len(mine) > len(shown):
            lines.append(
                f"      ({plural(len(mine) - len(shown), 'shorter step')}: JSON critical_path_by_step)"
            )
    return lines


def _largest_part(row: dict) -> str:
    """The part with the most time on a step's path and its share of the length: ``host 99.6 %``."""
    part = max(words.CRITICAL_PATH_WORDS, key=lambda k: row[f"{k}_us"])
    if not row["length_us"]:
        return "no time on it"
    return f"{words.CRITICAL_PATH_WORDS[part]} {units.percent(row[f'{part}_us'] / row['length_us'])}"


def accelerator(devices: list[dict]) -> str:
    """The word for a trace's devices in headings: ``TPU`` when every device is a TPU (an XPlane's ``tpu:N``),
    else ``GPU``."""
    labels = [str(d.get("device")) for d in devices]
    return "TPU" if labels and all(label.startswith("tpu:") for label in labels) else "GPU"


def device_window(devices: list[dict], source_format: str | None = None, steps_left_out: bool = False) -> str:
    """What the device table's shares are of, in words: HTA's window on GPUs (without the last profiler step
    when HTA leaves it out), an IPU's step time, a ``.pvti`` device's first to last device event."""
    if any(d.get("platform") == words.GPU for d in devices):
        last = (
            " launched before the last ProfilerStep began (the last, incomplete step left out as HTA does)"
            if steps_left_out
            else ""
        )
        return f"each device's window, HTA's: its first to last {accelerator(devices)} work item{last}"
    if source_format == "pvti":
        return "each device's window: its first to last device event"
    return "each IPU's step time: its step cycles over the clock"


def device_labels(devices: list[dict]) -> dict[str, str]:
    """The device table's column headers and the caption defining them, in the devices' platform's words."""
    platform = words.GPU if any(d.get("platform") == words.GPU for d in devices) else words.IPU
    comm, memory = words.COMMUNICATION_WORD[platform], words.MEMORY_WORD[platform]
    tpu = platform == words.GPU and accelerator(devices) == "TPU"
    if tpu:
        defined = (
            f"{comm} = HTA's COMMUNICATION, on a TPU its XLA collectives (all-reduce, all-gather, ...); "
            f"{memory} = HTA's MEMORY, on a TPU its XLA copy ops (copy-start, copy-done)"
        )
    elif platform == words.GPU:
        defined = (
            f"{comm} = HTA's COMMUNICATION (NCCL/RCCL kernels); {memory} = HTA's MEMORY (memcpy and memset: "
            f"{words.category_word('host_io', platform)} + {words.category_word('other', platform)} below)"
        )
    else:
        defined = f"{comm} = exchange + global exchange; {memory} = host stream copies"
    return {
        "communication": comm,
        "memory": memory,
        "host_blocked": "host blocked",
        "defined": defined,
        "overlap": f"overlap = {comm} overlapped by compute",
        "blocked": f"host blocked = {words.HOST_BLOCKED}: "
        + (
            "not measured on a TPU (no runtime call of its trace is known to block)"
            if tpu
            else "the host in "
            + (
                "sync calls (cudaDeviceSynchronize, ...)"
                if platform == words.GPU
                else "calls waiting for the IPU (.pvti)"
            )
            + " inside the window"
        ),
    }


def _device_columns(devices: list[dict], labels: dict[str, str]) -> list[tuple[str, int, list[str]]]:
    """The device table's figure columns: (header, width, one cell per device)."""

    def pct(key: str) -> list[str]:
        return [units.value(d.get(key), "%", missing="-") for d in devices]

    busy = [None if d.get("idle_pct") is None else 100.0 - d["idle_pct"] for d in devices]
    return [
        ("window", 10, [units.duration(d.get("span_us")) for d in devices]),
        ("busy", 7, [units.value(b, "%", missing="-") for b in busy]),
        ("idle", 7, pct("idle_pct")),
        ("compute", 8, pct("compute_pct")),
        (labels["communication"], max(len(labels["communication"]), 8), pct("communication_pct")),
        (labels["memory"], max(len(labels["memory"]), 7), pct("memory_pct")),
        ("overlap", 8, pct("comm_comp_overlap_pct")),
        (labels["host_blocked"], 12, pct("host_wait_pct")),
    ]


def _device_tables(devices: list[dict], labels: dict[str, str], indent: str, width: int) -> list[str]:
    """The device rows, as one table when it fits ``width``, else its figure columns split over as few
    tables as fit (each repeating rank and device)."""
    columns = _device_columns(devices, labels)
    key_width = len(f"{indent}  {'rank':>4}  {'device':<7}")
    groups: list[list[tuple[str, int, list[str]]]] = [[]]
    used = key_width
    for column in columns:
        cell = (2 if column is columns[1] else 1) + column[1]
        if groups[-1] and used + cell > width:
            groups.append([])
            used = key_width
        groups[-1].append(column)
        used += cell
    lines: list[str] = []
    for group in groups:
        cells = [(2 if c is columns[1] else 1, c) for c in group]
        lines.append(
            f"{indent}  {'rank':>4}  {'device':<7}"
            + "".join(" " * gap + f"{c[0]:>{c[1]}}" for gap, c in cells)
        )
        for i, d in enumerate(devices):
            rank = "-" if d.get("rank") is None else str(d["rank"])
            lines.append(
                f"{indent}  {rank:>4}  {d['device']:<7}"
                + "".join(" " * gap + f"{c[2][i]:>{c[1]}}" for gap, c in cells)
            )
    return lines


def render_device_table(
    devices: list[dict],
    indent: str = "",
    source_format: str | None = None,
    steps_left_out: bool = False,
    width: int = WIDTH,
) -> list[str]:
    """The per-device table as text lines (GPU traces and IPU profiles alike), split into two tables when
    one is wider than ``width``; its caption lines are wrapped by :func:`fit_lines` in ``render_text``."""
    labels = device_labels(devices)
    title = f"Devices (shares of {device_window(devices, source_format, steps_left_out)})"
    lines = ["", f"{indent}{title}", *_device_tables(devices, labels, indent, width)]
    lines.append(f"{indent}  {labels['defined']};")
    lines.append(f"{indent}  {labels['overlap']}; {labels['blocked']}")
    return lines


def whole_work_text(spans: list[dict]) -> str:
    """The devices' first to last work item with the last profiler step, beside HTA's window (both named)."""
    each = ", ".join(
        ("" if s.get("rank") is None else f"rank {s['rank']} ")
        + f"{s['device']} {units.duration(s['span_us'])}"
        for s in spans
    )
    return f"the last step included, the work runs from its first to its last item: {each}"


def steps_left_out(summary: dict) -> bool:
    """Whether HTA's window leaves the last profiler step out: the trace has two or more ProfilerSteps."""
    it = summary.get("iterations") or {}
    return it.get("source") == "ProfilerStep" and (it.get("count") or 0) >= 2


#: What the idle causes mean (the text's and the HTML report's note).
IDLE_NOTE = (
    f"{words.HTA_HOST_WAIT} = a whole gap before work launched after the previous work on its stream ended (the "
    f"time account splits each gap at the launch: {words.IDLE_HOST} before it); "
    f"{words.HTA_KERNEL_WAIT} = a gap under 30 us between work launched in time (launch overhead); other idle = "
    "longer gaps"
)


#: Iterations the text lists (the JSON holds more).
TEXT_ITERATIONS = 20


def render_iterations(it: dict, shown: int = TEXT_ITERATIONS) -> list[str]:
    """The per-iteration step-time table: step, start (from the first step), duration."""
    steps = it["steps"]
    what = {
        "ProfilerStep": "ProfilerStep spans",
        "Engine::run": "Engine::run spans",
        "runs": "execution runs, host time",
        "steps.cycles": "execution runs, busiest IPU's cycles",
    }.get(it["source"], it["source"])
    lines = [
        "",
        f"Iterations ({it['count']:,}, from {what})",
        f"  {'step':>8}  {'start':>12}  {'duration':>12}",
    ]
    first = steps[0]["start_us"] if steps else 0.0
    for row in steps[:shown]:
        lines.append(
            f"  {row['step']:>8}  {units.duration(row['start_us'] - first):>12}  "
            f"{units.duration(row['dur_us']):>12}"
        )
    if it["count"] > shown:
        lines.append(f"  ... {it['count'] - shown:,} more (--format json lists up to {len(steps):,})")
    return lines


#: Short codes of HTA's kernel types, for the Top kernels table when the whole word does not fit.
KERNEL_TYPE_CODES = {"COMMUNICATION": "COMM", "COMPUTATION": "COMP", "MEMORY": "MEM"}


def render_top_kernels(kernels: list[dict], width: int = WIDTH) -> list[str]:
    """The Top kernels table: each kernel's figures and HTA's kernel type on one line, its name after them
    when every name fits, else under them; the type as a short code, defined under the table, when the
    whole word makes the line wider than ``width``."""

    def figures(k: dict) -> str:
        return (
            f"    {units.duration(k['total_us']):>10}  {k['count']:>7,}  {units.duration(k.get('mean_us')):>10}  "
            f"{units.duration(k.get('min_us')):>10}  {units.duration(k.get('max_us')):>10}  "
            f"{units.duration(k.get('std_us')):>10}  "
        )

    types = [k["kernel_type"] for k in kernels]
    type_w = max(len(t) for t in (*types, "type"))
    coded = len(figures(kernels[0])) + type_w + 1 > width
    if coded:
        types = [KERNEL_TYPE_CODES.get(t, t) for t in types]
        type_w = max(len(t) for t in (*types, "type"))
    if len(figures(kernels[0])) + type_w + 1 > width:  # even coded: each kernel on two lines of columns
        return _top_kernels_two_lines(kernels, types, type_w, width) + _type_codes(kernels, coded)
    head = f"    {'total':>10}  {'count':>7}  {'mean':>10}  {'min':>10}  {'max':>10}  {'std':>10}  {'type':<{type_w}} "
    rows = named_rows(
        [figures(k) + f"{t:<{type_w}} " for k, t in zip(kernels, types, strict=True)],
        (k["name"] for k in kernels),
        width,
    )
    lines = [head + "name"] if len(rows) == len(kernels) else [head.rstrip(), "      name"]
    return lines + rows + _type_codes(kernels, coded)


def _type_codes(kernels: list[dict], coded: bool) -> list[str]:
    """The line under the Top kernels table defining the kernel type codes it uses (none when uncoded)."""
    used = sorted({t for t in (k["kernel_type"] for k in kernels) if KERNEL_TYPE_CODES.get(t, t) != t})
    if not (coded and used):
        return []
    return ["    type: " + ", ".join(f"{KERNEL_TYPE_CODES[t]} = {t}" for t in used) + " (HTA's)"]


def _top_kernels_two_lines(kernels: list[dict], types: list[str], type_w: int, width: int) -> list[str]:
    """The Top kernels table where one line of figures is wider than ``width`` (75 columns and the type):
    each kernel's total, count, mean and min on one line, its max, std and type on the next, each line's
    columns under the header line of its own, and its name under them, 6 columns in (was: the line wrapped
    through its columns, ``std`` and ``type`` 4 columns deeper than their figures)."""
    lines = [
        f"    {'total':>10}  {'count':>7}  {'mean':>10}  {'min':>10}",
        f"    {'max':>10}  {'std':>10}  type",
        "      name",
    ]
    names = short_names([k["name"] for k in kernels], width=min(width - 6, NAME_WIDTH))
    for k, kind, name in zip(kernels, types, names, strict=True):
        lines += [
            f"    {units.duration(k['total_us']):>10}  {k['count']:>7,}  {units.duration(k.get('mean_us')):>10}  "
            f"{units.duration(k.get('min_us')):>10}",
            f"    {units.duration(k.get('max_us')):>10}  {units.duration(k.get('std_us')):>10}  {kind}",
            f"      {name}",
        ]
    return lines


def render_trace_text(
    tr: dict,
    platform: str = words.GPU,
    source_format: str | None = None,
    steps_left_out: bool = False,
    width: int = WIDTH,
) -> list[str]:
    """The trace part of ``popprof summary`` as lines of text, in ``platform``'s words, its tables and
    names fitted to ``width`` (its prose lines are wrapped by :func:`fit_lines` in ``render_text``)."""
    ranks = tr.get("ranks") or []
    head = f"{plural(tr['events'], 'event')} on {plural(tr['threads'], 'thread')}"
    if len(ranks) > 1:
        head += f", {len(ranks)} ranks ({', '.join(str(r) for r in ranks)})"
    elif ranks:
        head += f", rank {ranks[0]}"
    lines = ["", "Trace", f"  {head}; {units.duration(tr.get('span_us'))} from the first event to the last"]
    if tr.get("bookkeeping_events"):
        recorded = tr.get("recorded_span_us")
        whole = (
            f"; with them the recording spans {units.duration(recorded)}"
            if recorded is not None and units.duration(recorded) != units.duration(tr.get("span_us"))
            else ""
        )
        lines.append(
            f"  ({tr['bookkeeping_events']:,} profiler bookkeeping events left out of the span and the figures "
            f"below{whole})"
        )
    devices = tr.get("devices") or []
    if devices:
        lines += render_device_table(
            devices, indent="  ", source_format=source_format, steps_left_out=steps_left_out, width=width
        )[1:]
    if tr.get("work_spans"):
        lines.append(f"    {whole_work_text(tr['work_spans'])}")
    causes = tr.get("idle_causes") or []
    if any(c["idle_us"] for c in causes):
        lines += [
            "",
            "  Why the device idled (HTA's idle breakdown: share of the idle time of its streams, summed over "
            "streams)",
        ]
        totals: dict[tuple, float] = {}
        for c in causes:
            key = (c.get("rank"), c["device"])
            totals[key] = totals.get(key, 0.0) + c["idle_us"]
        for (rank, device), total in totals.items():
            if not total:  # the device never idled: nothing to explain (not a row of dashes)
                continue
            parts = [
                f"{words.HTA_IDLE_CAUSES.get(c['idle_category'], c['idle_category'].replace('_', ' '))} "
                f"{units.percent(c['idle_us'] / total if total else None, missing='-')}"
                for c in causes
                if (c.get("rank"), c["device"]) == (rank, device)
            ]
            who = f"rank {rank} {device}" if rank is not None else device
            lines.append(f"    {who}: " + ", ".join(parts))
        lines.append(f"    {IDLE_NOTE}")
    kernels = tr.get("top_kernels") or []
    if kernels:
        unit = accelerator(tr.get("devices") or [])
        lines += ["", f"  Top kernels ({unit} time)", *render_top_kernels(kernels, width)]
    launches = tr.get("launch_delays") or []
    if launches:
        whose = "HTA's, the last ProfilerStep left out" if steps_left_out else "HTA's"
        lines += ["", f"  Kernel launch delay (launch call end -> kernel start; {whose})"]
        for x in launches:
            rank = "" if x.get("rank") is None else f"rank {x['rank']} "
            lines.append(
                f"    {rank}{x['device']}: {x['launches']:,} launches, mean {units.duration(x['mean_us'])}, "
                f"median {units.duration(x['median_us'])}, p95 {units.duration(x['p95_us'])}"
            )
    lines += render_queue_lengths(tr.get("queue_lengths"), steps_left_out)
    lines += render_copies(tr.get("copies") or [], width)
    lines += render_host_cpu(tr.get("host_cpu") or [])
    lines += render_counters(tr.get("counters"), width)
    lines += render_device_memory(tr.get("device_memory") or [])
    lines += render_critical_path(tr.get("critical_path"), width)
    lines += render_critical_path_by_step(tr.get("critical_path_by_step"), width)
    lines += render_kernel_sequences(tr.get("kernel_sequences"), steps_left_out, width)
    lines += render_gpu_annotations(tr.get("gpu_annotations"), steps_left_out, width)
    cpu = tr.get("top_cpu_ops_by_self") or []
    if cpu:
        lines += ["", "  Top CPU ops by self time"]
        lines += named_rows(
            [f"    {units.duration(op['self_us']):>10}  {op['count']:>6,} x  " for op in cpu],
            (op["name"] for op in cpu),
            width,
        )
    wait = tr.get("host_wait") or {}
    if wait.get("events"):
        top = ", ".join(f"{w['name']} {w['count']:,} x {units.duration(w['total_us'])}" for w in wait["top"])
        lines += [
            "",
            f"  Host blocked on device: {units.duration(wait['total_us'])} "
            f"({units.percent(wait['share'], missing='-')} of the span): {top}",
        ]
        callers = (wait.get("callers") or [])[:3]
        if callers:
            lines.append("    by caller (the outermost operator above each call)")
            lines += named_rows(
                [f"    {units.duration(c['total_us']):>10}  {c['count']:>6,} x  " for c in callers],
                (
                    f"{c['call']} in {c['caller']}" if c["caller"] else f"{c['call']} outside any operator"
                    for c in callers
                ),
                width,
            )
    threads = tr.get("busiest_threads") or []
    if threads:
        lines += ["", "  Busiest threads (time under top-level events)"]
        for t in threads:
            share = "" if t.get("busy_share") is None else f" ({units.percent(t['busy_share'])})"
            lines.append(f"    {units.duration(t['busy_us']):>10}{share:<10} {_who(t)}")
    missing = tr.get("device_side_missing") or {}
    if missing:
        calls = ", ".join(f"{n} {c:,} x" for n, c in missing["launch_calls"].items())
        lines += [
            "",
            f"  Device side missing: {missing['launches']:,} kernel launches ({calls}) and no device "
            "events (see host.launches-without-device)",
        ]
    silent = tr.get("no_device_activity") or {}
    if silent:
        lines += [
            "",
            f"  No device activity recorded: the trace names {plural(silent['devices'], 'device')} "
            f"({', '.join(silent['names'])}) but holds no kernel, copy or launch",
        ]
    act = tr.get("device_activity") or {}
    if act.get("by_category"):
        cats = ", ".join(
            f"{words.category_word(c, platform)} {units.duration(v['total_us'])}"
            for c, v in act["by_category"].items()
        )
        lines += ["", f"  Device time by category: {cats}"]
        if act.get("active_span_us"):
            lines.append(
                f"  Device busy {units.duration(act['busy_us'])} of the device-active span "
                f"{units.duration(act['active_span_us'])} (first device event on any device to the last; "
                f"idle {units.percent(act['idle_share'])}, {act['idle_gaps']:,} gaps)"
            )
    return lines
