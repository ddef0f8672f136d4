"""Any Profile as a Chrome trace (JSON object format) that ui.perfetto.dev and chrome://tracing open.

- ``events``: each event as it is: ``X`` (also with a zero duration), ``i``
  for instants (``events.instant_scope``, with their scope; from sources
  other than Chrome traces a zero duration is an instant), ``B`` when it never
  ended; ``cat`` = channel, with its ``args`` when they were kept, and its
  device category as ``args.device_category`` plus a colour (``cname``);
- ``flows``: ``s``/``t``/``f`` events as the trace held them (ids, binding points);
- ``threads``: ``M`` events naming processes and threads, their labels and sort order;
- ``counters``: ``C`` events (one per pid, counter and timestamp);
- an :class:`Overlay` when asked (``timeline --critical-path``): its events
  marked with an arg, its flows after the trace's own;
- the trace's top-level members (``deviceProperties``, ``distributedInfo``,
  ``schemaVersion``, ...: metadata ``chrome.top.*``) at the top level again;
- ``steps`` (a Graph Analyser execution profile): one track per IPU in a
  process "IPU execution", steps laid out back to back in time, cycles divided
  by ``target.clock_hz``; each run starts at ``runs.start_us`` when known,
  otherwise after the previous run. Name = program, ``cat`` = step category.

Reading an exported trace back with the Chrome reader gives the same events
(ids, threads, names, channels, times, durations, nesting), flows and
top-level metadata; on a Chrome trace, the event counts by phase match the
input's (processes that only had a string pid gain a ``process_name``).

Ids written as text in the source (Kineto's ``"Traces"`` / ``"Spans"`` pids, ``"stream 7"`` tids) are
written as that text again, never as the reader's stand-in numbers (``ids.SYNTHETIC_ID_BASE`` and up):
the text is the process's (thread's) name in the ``threads`` table, as the reader keeps it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson
import pandas as pd

from ..io import jsonout
from ..io.atomic import atomic_path
from ..model.profile import Profile
from .ids import SYNTHETIC_ID_BASE

#: Colour names understood by chrome://tracing, per category.
CATEGORY_COLOURS: dict[str, str] = {
    "compute": "thread_state_running",
    "exchange": "rail_load",
    "global_exchange": "rail_animation",
    "host_io": "thread_state_iowait",
    "sync": "thread_state_uninterruptible",
    "other": "grey",
}
#: pid of the synthetic "IPU execution" process (tid = IPU number). Outside the range of real pids.
IPU_PID = 1 << 31
CHUNK = 50_000


@dataclass
class TimelineStats:
    """What an export wrote (and what it could not place)."""

    events: int = 0
    steps: int = 0
    counters: int = 0
    skipped_no_start: int = 0
    flows: int = 0
    marked: int = 0
    overlay_flows: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Overlay:
    """What an export adds to the trace: ``mark`` (an arg set to true) on the events ``event_ids``, and
    ``flows`` (the flows table's columns) after the trace's own."""

    mark: str
    event_ids: np.ndarray
    flows: pd.DataFrame


def _opt_str(value: object) -> str | None:
    return (
        None
        if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA
        else str(value)
    )


@dataclass
class IdText:
    """The text of ids a reader stood in numbers for (``SYNTHETIC_ID_BASE`` and up): pid -> text and
    (pid, tid) -> text, from the process and thread names of the ``threads`` table."""

    pids: dict[int, str] = field(default_factory=dict)
    tids: dict[tuple[int, int], str] = field(default_factory=dict)

    @classmethod
    def of(cls, profile: Profile) -> IdText:
        out = cls()
        threads = profile.get("threads")
        if threads is None or threads.empty:
            return out
        pids, tids = threads["pid"].tolist(), threads["tid"].tolist()
        pnames = threads["process_name"].astype(object).tolist() if "process_name" in threads else []
        tnames = threads["thread_name"].astype(object).tolist() if "thread_name" in threads else []
        for i, (pid, tid) in enumerate(zip(pids, tids, strict=True)):
            if isinstance(pid, int) and pid >= SYNTHETIC_ID_BASE and pnames and isinstance(pnames[i], str):
                out.pids.setdefault(pid, pnames[i])
            if isinstance(tid, int) and tid >= SYNTHETIC_ID_BASE and tnames and isinstance(tnames[i], str):
                out.tids.setdefault((pid, tid), tnames[i])
        return out

    def pid(self, pid: object) -> object:
        """The pid as the source wrote it."""
        return self.pids.get(pid, pid) if isinstance(pid, int) and pid >= SYNTHETIC_ID_BASE else pid

    def tid(self, pid: object, tid: object) -> object:
        """The tid as the source wrote it."""
        if isinstance(tid, int) and tid >= SYNTHETIC_ID_BASE:
            return self.tids.get((pid, tid), tid)
        return tid


def _event_records(
    events: pd.DataFrame,
    stats: TimelineStats,
    instants_known: bool,
    ids: IdText,
    overlay: Overlay | None = None,
    keep_args: bool = True,
) -> Iterator[bytes]:
    """``instants_known``: the source tells instants from zero-duration complete events (``instant_scope``);
    ``overlay``: the events it marks get its arg; ``keep_args``: write the events' args (when read)."""
    has_start = events["start_us"].notna().to_numpy()
    stats.skipped_no_start += int((~has_start).sum())
    events = events[has_start]
    stats.events += len(events)
    with_args = keep_args and "args" in events.columns
    marked = (
        np.isin(events["event_id"].to_numpy(), overlay.event_ids)
        if overlay is not None
        else np.zeros(len(events), dtype=bool)
    )
    stats.marked += int(marked.sum())
    mark_key = overlay.mark if overlay is not None else ""
    has_scope = "instant_scope" in events.columns
    for lo in range(0, len(events), CHUNK):
        part = events.iloc[lo : lo + CHUNK]
        columns = [
            part["name"].astype(object).tolist(),
            part["channel"].astype(object).tolist(),
            part["pid"].tolist(),
            part["tid"].tolist(),
            part["start_us"].tolist(),
            part["dur_us"].tolist(),
            part["device_category"].astype(object).tolist(),
            part["args"].astype(object).tolist() if with_args else [None] * len(part),
            part["instant_scope"].astype(object).tolist() if has_scope else [None] * len(part),
            marked[lo : lo + CHUNK].tolist(),
        ]
        out = []
        for name, cat, pid, tid, ts, dur, category, args, scope, mark in zip(*columns, strict=True):
            record: dict[str, object] = {
                "name": _opt_str(name) or "",
                "pid": ids.pid(pid),
                "tid": ids.tid(pid, tid),
                "ts": ts,
            }
            cat = _opt_str(cat)
            if cat is not None:
                record["cat"] = cat
            scope = _opt_str(scope)
            if dur != dur:  # NaN: the event never ended
                record["ph"] = "B"
            elif scope is not None or (dur == 0 and not instants_known):
                record["ph"] = "i"
                record["s"] = scope or "t"
            else:
                record["ph"] = "X"
                record["dur"] = dur
            merged = orjson.loads(args) if isinstance(args, str) and args else {}
            category = _opt_str(category)
            if category is not None:
                if isinstance(merged, dict):
                    merged.setdefault("device_category", category)
                record["cname"] = CATEGORY_COLOURS.get(category, "grey")
            if mark and isinstance(merged, dict):
                merged[mark_key] = True
            if merged:
                record["args"] = merged
            out.append(orjson.dumps(record))
        yield b",\n".join(out)


#: Metadata events written per process / per thread: (event name, threads column, args key).
PROCESS_METADATA = (
    ("process_name", "process_name", "name"),
    ("process_labels", "process_labels", "labels"),
    ("process_sort_index", "process_sort_index", "sort_index"),
)
THREAD_METADATA = (
    ("thread_name", "thread_name", "name"),
    ("thread_sort_index", "thread_sort_index", "sort_index"),
)


def _thread_records(profile: Profile, ids: IdText) -> Iterator[bytes]:
    threads = profile.get("threads")
    if threads is None:
        return
    pids, tids = threads["pid"].tolist(), threads["tid"].tolist()
    column = {
        c: threads[c].astype(object).tolist() if c in threads.columns else [None] * len(threads)
        for _, c, _ in PROCESS_METADATA + THREAD_METADATA
    }
    written: set[tuple[str, int]] = set()
    out = []
    for i, (pid, tid) in enumerate(zip(pids, tids, strict=True)):  # a few rows per process
        for kind, col, key in PROCESS_METADATA:
            value = jsonout.plain(column[col][i])
            if value is not None and (kind, pid) not in written:
                written.add((kind, pid))
                out.append(
                    orjson.dumps(
                        {"ph": "M", "name": kind, "pid": ids.pid(pid), "tid": 0, "args": {key: value}}
                    )
                )
        for kind, col, key in THREAD_METADATA:
            value = jsonout.plain(column[col][i])
            if value is not None:
                record = {"ph": "M", "name": kind, "pid": ids.pid(pid), "tid": ids.tid(pid, tid)}
                out.append(orjson.dumps({**record, "args": {key: value}}))
    if out:
        yield b",\n".join(out)


def _flow_records(flows: pd.DataFrame, stats: TimelineStats, ids: IdText) -> Iterator[bytes]:
    """Flow events as the trace held them; numeric ids are written as numbers again."""
    for lo in range(0, len(flows), CHUNK):
        part = flows.iloc[lo : lo + CHUNK]
        out = []
        for pid, tid, ts, ph, flow_id, name, cat, bp in zip(
            part["pid"].tolist(),
            part["tid"].tolist(),
            part["ts_us"].tolist(),
            part["phase"].astype(object).tolist(),
            part["id"].astype(object).tolist(),
            part["name"].astype(object).tolist(),
            part["channel"].astype(object).tolist(),
            part["binding"].astype(object).tolist(),
            strict=True,
        ):
            record: dict[str, object] = {
                "ph": _opt_str(ph) or "s",
                "pid": ids.pid(pid),
                "tid": ids.tid(pid, tid),
                "ts": ts,
            }
            flow_id = _opt_str(flow_id)
            if flow_id is not None:
                record["id"] = int(flow_id) if flow_id.lstrip("-").isdigit() else flow_id
            for key, value in (("name", name), ("cat", cat), ("bp", bp)):
                value = _opt_str(value)
                if value is not None:
                    record[key] = value
            out.append(orjson.dumps(record))
        stats.flows += len(out)
        yield b",\n".join(out)


def _top_level(profile: Profile) -> dict[str, object]:
    """The source trace's top-level members (metadata ``chrome.top.<key>``, JSON)."""
    out: dict[str, object] = {}
    for key, value in profile.meta.items():
        if key.startswith("chrome.top.") and key != "chrome.top.traceEvents":
            try:
                out[key.removeprefix("chrome.top.")] = orjson.loads(value)
            except orjson.JSONDecodeError:
                out[key.removeprefix("chrome.top.")] = value
    return out


def _counter_records(counters: pd.DataFrame, stats: TimelineStats, ids: IdText) -> Iterator[bytes]:
    grouped = counters.groupby(["pid", "name", "ts_us"], observed=True, sort=True)
    out = []
    for (pid, name, ts), group in grouped:
        args = dict(zip(group["series"].astype(str).tolist(), group["value"].tolist(), strict=True))
        out.append(
            orjson.dumps(
                {"ph": "C", "name": str(name), "pid": ids.pid(int(pid)), "ts": float(ts), "args": args}
            )
        )
        stats.counters += 1
        if len(out) >= CHUNK:
            yield b",\n".join(out)
            out = []
    if out:
        yield b",\n".join(out)


def step_layout(profile: Profile) -> pd.DataFrame | None:
    """Steps with ``start_us`` / ``dur_us`` in time, per IPU (``None`` without steps or a clock)."""
    steps = profile.get("steps")
    clock = profile.target_value("clock_hz")
    if steps is None or steps.empty or not clock:
        return None
    s = steps.sort_values(["run", "step", "ipu"]).reset_index(drop=True)
    cycles = s["cycles"].astype("float64").fillna(0.0)
    end_cycles = cycles.groupby([s["run"], s["ipu"]]).cumsum()
    start_cycles = end_cycles - cycles
    us_per_cycle = 1e6 / float(clock)
    run_length = (end_cycles.groupby(s["run"]).max() * us_per_cycle).sort_index()
    offsets = run_length.cumsum().shift(fill_value=0.0)
    runs = profile.get("runs")
    if runs is not None and runs["start_us"].notna().all() and len(runs):
        known = runs.set_index("run")["start_us"]
        offsets = known.reindex(offsets.index).fillna(offsets)
    start = s["run"].map(offsets).to_numpy(dtype=np.float64) + start_cycles.to_numpy() * us_per_cycle
    return pd.DataFrame(
        {
            "ipu": s["ipu"].to_numpy(),
            "run": s["run"].to_numpy(),
            "step": s["step"].to_numpy(),
            "program": s["program"].astype(object),
            "program_type": s["program_type"].astype(object),
            "category": s["category"].astype(object),
            "cycles": s["cycles"],
            "start_us": start,
            "dur_us": cycles.to_numpy() * us_per_cycle,
        }
    )


def _step_records(layout: pd.DataFrame, stats: TimelineStats) -> Iterator[bytes]:
    out = [
        orjson.dumps({"ph": "M", "name": "process_name", "pid": IPU_PID, "args": {"name": "IPU execution"}})
    ]
    for ipu in sorted(layout["ipu"].unique().tolist()):
        out.append(
            orjson.dumps(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": IPU_PID,
                    "tid": int(ipu),
                    "args": {"name": f"IPU {ipu}"},
                }
            )
        )
    yield b",\n".join(out)
    for lo in range(0, len(layout), CHUNK):
        part = layout.iloc[lo : lo + CHUNK]
        out = []
        for ipu, run, step, program, ptype, category, cycles, ts, dur in zip(
            part["ipu"].tolist(),
            part["run"].tolist(),
            part["step"].tolist(),
            part["program"].tolist(),
            part["program_type"].tolist(),
            part["category"].tolist(),
            part["cycles"].astype(object).tolist(),
            part["start_us"].tolist(),
            part["dur_us"].tolist(),
            strict=True,
        ):
            category = _opt_str(category) or "other"
            out.append(
                orjson.dumps(
                    {
                        "ph": "X",
                        "name": _opt_str(program) or f"step {step}",
                        "cat": category,
                        "pid": IPU_PID,
                        "tid": int(ipu),
                        "ts": ts,
                        "dur": dur,
                        "cname": CATEGORY_COLOURS.get(category, "grey"),
                        "args": {
                            "run": run,
                            "step": step,
                            "program_type": _opt_str(ptype),
                            "cycles": None if cycles is pd.NA or cycles is None else int(cycles),
                        },
                    }
                )
            )
        stats.steps += len(out)
        yield b",\n".join(out)


def iter_chrome_trace(
    profile: Profile,
    stats: TimelineStats | None = None,
    overlay: Overlay | None = None,
    keep_args: bool = True,
) -> Iterator[bytes]:
    """Yield the Chrome trace JSON of ``profile`` in chunks, with ``overlay`` (its marks and flows) when
    given; ``keep_args=False`` leaves the events' args out (a profile read with them for the overlay)."""
    stats = stats if stats is not None else TimelineStats()
    top = {"displayTimeUnit": "ms", **_top_level(profile)}
    producer = {"producer": "popprof", "profile": profile.name, "source_format": profile.source_format}
    other = top.get("otherData")
    top["otherData"] = {**other, "popprof": producer} if isinstance(other, dict) else producer
    yield orjson.dumps(top)[:-1] + b',\n"traceEvents":[\n'
    ids = IdText.of(profile)
    parts: list[Iterator[bytes]] = [_thread_records(profile, ids)]
    events = profile.get("events")
    if events is not None and len(events):
        instants_known = profile.source_format == "chrome_trace"
        parts.append(_event_records(events, stats, instants_known, ids, overlay, keep_args))
    flows = profile.get("flows")
    if flows is not None and len(flows):
        parts.append(_flow_records(flows, stats, ids))
    if overlay is not None and len(overlay.flows):
        stats.overlay_flows += len(overlay.flows)
        parts.append(_flow_records(overlay.flows, stats, ids))
    counters = profile.get("counters")
    if counters is not None and len(counters):
        parts.append(_counter_records(counters, stats, ids))
    if profile.has("steps"):
        layout = step_layout(profile)
        if layout is None:
            stats.notes.append(
                "execution steps not exported: the profile has no clock frequency (target.clock_hz)"
            )
        else:
            parts.append(_step_records(layout, stats))
    first = True
    for part in parts:
        for chunk in part:
            if not chunk:
                continue
            yield chunk if first else b",\n" + chunk
            first = False
    yield b"\n]}\n"


def write_timeline(
    profile: Profile,
    out: str | os.PathLike[str],
    overlay: Overlay | None = None,
    keep_args: bool = True,
) -> TimelineStats:
    """Write ``profile`` as Chrome trace JSON to ``out`` atomically (gzip when ``out`` ends ``.gz``), with
    ``overlay`` and ``keep_args`` as :func:`iter_chrome_trace` takes them."""
    import gzip

    stats = TimelineStats()
    out = Path(out)
    with atomic_path(out) as tmp, open(tmp, "wb") as raw, contextlib.ExitStack() as stack:
        handle = (
            stack.enter_context(gzip.GzipFile(fileobj=raw, mode="wb", mtime=0))
            if out.suffix == ".gz"
            else raw
        )
        for chunk in iter_chrome_trace(profile, stats, overlay, keep_args):
            handle.write(chunk)
    return stats
