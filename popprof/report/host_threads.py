"""The summary's "Host threads in the device's idle gaps" block: on CPU or off CPU (``metrics.host_cpu``)."""

from __future__ import annotations

from ..io import units, words
from ..metrics.host_cpu import on_cpu_parts, parts_words

#: threads shown per device: the one that launched most, then others that ran in the gaps
THREADS_SHOWN = 3


def shown_threads(rows: list[dict]) -> dict[tuple, list[dict]]:
    """Per ``(rank, device)``, the threads the summary and the report show: the one that launched most, then
    others that ran in the gaps, at most :data:`THREADS_SHOWN` (a device without gaps: its first row only)."""
    devices: dict[tuple, list[dict]] = {}
    for row in rows:
        devices.setdefault((row.get("rank"), row["device"]), []).append(row)
    return {
        key: [threads[0], *[t for t in threads[1:] if t["gaps_on_cpu_us"] > 0]][:THREADS_SHOWN]
        for key, threads in devices.items()
    }


def render_host_cpu(rows: list[dict]) -> list[str]:
    """Per device, its idle gaps and the host threads' time on CPU and off CPU in them (prose lines, wrapped
    by ``fit_lines``); ``[]`` without rows (no context switches in the input)."""
    if not rows:
        return []
    lines = ["", "  Host threads in the device's idle gaps (context switches; CPU samples)"]
    for (rank, device), shown in shown_threads(rows).items():
        first = shown[0]
        who = device if rank is None else f"rank {rank} {device}"
        if not first["gaps_us"]:
            lines.append(f"    {who}: no idle gap while its host threads ran")
            continue
        lines.append(f"    {who} idle {units.duration(first['gaps_us'])} in {first['gaps']:,} gaps")
        for t in shown:
            launched = f", {t['launches']:,} launches" if t["launches"] else ""
            lines.append(f"      {t['thread']}{launched}: {_split(t)}")
            if t["gap_functions"]:
                named = ", ".join(
                    f"{f['function']} {units.percent(f['samples'] / t['gap_samples'])}"
                    for f in t["gap_functions"]
                )
                lines.append(f"        sampled in the gaps: {named}")
    return lines


def _split(t: dict) -> str:
    """``on CPU 1.20 ms (60.0 %: computing 45.0 %, ...), off CPU 0.80 ms (40.0 %)`` of a thread's time in the
    gaps (the parts from its CPU samples' calls, when it has them)."""
    gaps = t["gaps_us"]
    share = units.percent(t["gaps_on_cpu_us"] / gaps)
    named = parts_words(on_cpu_parts(t)) if t["gaps_on_cpu_us"] else ""
    share += f": {named}" if named else ""
    return (
        f"{words.ON_CPU} {units.duration(t['gaps_on_cpu_us'])} ({share}), "
        f"{words.OFF_CPU} {units.duration(t['gaps_off_cpu_us'])} ({units.percent(t['gaps_off_cpu_us'] / gaps)})"
    )
