"""Assemble the ``events`` and ``threads`` tables from column arrays (shared by the trace readers)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from . import device, nesting


def categorical(codes: np.ndarray, labels: Sequence[str]) -> pd.Categorical:
    """A categorical from integer codes (-1 = missing) and their labels (must be distinct)."""
    return pd.Categorical.from_codes(
        codes.astype(np.int32, copy=False), categories=pd.Index(list(labels), dtype="str"), validate=False
    )


def build_events(
    *,
    pid: np.ndarray,
    tid: np.ndarray,
    start: np.ndarray,
    dur: np.ndarray,
    name_codes: np.ndarray,
    names: Sequence[str],
    channel_codes: np.ndarray,
    channels: Sequence[str],
    source_format: str,
    device_map: Mapping[str, str | None] | None = None,
    parent: np.ndarray | None = None,
    depth: np.ndarray | None = None,
    args: Sequence[str | None] | None = None,
    extra: Mapping[str, object] | None = None,
) -> tuple[pd.DataFrame, dict[str, int]]:
    """The events table, sorted by (pid, tid, start, longest first) with ``event_id`` = row number.

    When ``parent``/``depth`` are not given (Chrome traces) they are derived from
    time containment; when given (pvti, where the trace itself nests events)
    ``parent`` holds input row indices and is renumbered. ``extra`` holds more
    columns in input order: arrays (numpy or pandas), or ``(codes, labels)`` for a
    categorical; a dict passed as ``extra`` is emptied as its columns are reordered (so a
    large input is not held twice). Returns the frame and counts for the metadata
    (``partial_overlap``).
    """
    pid = np.asarray(pid, dtype=np.int64)
    tid = np.asarray(tid, dtype=np.int64)
    start = np.asarray(start, dtype=np.float64)
    dur = np.asarray(dur, dtype=np.float64)
    sort_start = nesting.filled(start, -np.inf)  # no copy when nothing is missing (the usual trace)
    if parent is None:
        order = nesting.sort_order(pid, tid, sort_start, nesting.filled(dur, 0.0))
    else:  # nesting is given: keep the source's (depth-first) order among equal starts
        order = np.lexsort((np.arange(len(pid)), sort_start, tid, pid))
    del sort_start
    # one column at a time, so each input copy is freed before the next is made
    pid = pid[order]
    tid = tid[order]
    start = start[order]
    dur = dur[order]
    counts: dict[str, int] = {}
    bounds = nesting.thread_bounds(pid, tid)
    if parent is None:
        end_tol = nesting.ends(start, dur)
        parent_sorted, depth_sorted = nesting.derive_nesting(bounds, start, dur, end_tol)
        counts["partial_overlap"] = nesting.count_partial_overlaps(bounds, start, dur, end_tol)
        del end_tol
    else:
        position = np.empty(len(order), dtype=np.int64)
        position[order] = np.arange(len(order), dtype=np.int64)
        p = np.asarray(parent, dtype=np.int64)[order]
        parent_sorted = np.where(p >= 0, position[np.maximum(p, 0)], -1)
        if depth is not None:  # clamped like depth_from_parent: a cast to int16 would wrap past 32,767
            depth_sorted = np.minimum(
                np.asarray(depth, dtype=np.int64)[order], np.iinfo(np.int16).max
            ).astype(np.int16)
        else:
            depth_sorted = nesting.depth_from_parent(parent_sorted)
    name_cat = categorical(np.asarray(name_codes)[order], names)
    channel_cat = categorical(np.asarray(channel_codes)[order], channels)
    del name_codes, channel_codes
    rules = device.resolve_map(source_format, device_map)
    top_level = parent_sorted < 0  # then the parents' own array holds the column's values (0 where missing)
    columns: dict[str, object] = {
        "event_id": np.arange(len(order), dtype=np.int64),
        "pid": pid,
        "tid": tid,
        "parent_id": pd.arrays.IntegerArray(np.maximum(parent_sorted, 0, out=parent_sorted), top_level),
        "depth": depth_sorted,
        "name": name_cat,
        "channel": channel_cat,
        "start_us": start,
        "dur_us": dur,
        "device_category": device.device_categories(channel_cat, name_cat, rules),
    }
    extra = extra if isinstance(extra, dict) else dict(extra or {})
    for key in list(extra):
        value = extra.pop(key)  # a dict is emptied: each input-order column is freed once reordered
        if isinstance(value, tuple):
            codes, labels = value
            columns[key] = categorical(np.asarray(codes)[order], labels)
        else:
            columns[key] = value[order]
    if args is not None:
        arr = np.asarray(args, dtype=object)[order] if len(order) else np.zeros(0, dtype=object)
        columns["args"] = pd.array(arr, dtype="str")
    return pd.DataFrame(columns, copy=False), counts


def gpu_work_columns(
    stream: np.ndarray, correlation: np.ndarray, device_codes: np.ndarray, devices: np.ndarray | list[str]
) -> dict[str, object]:
    """The device-work columns a GPU trace's reader hands :func:`build_events` as ``extra``: ``stream`` and
    ``correlation`` as nullable integers (a negative value: none) and ``device`` as codes into ``gpu:N`` labels
    (``devices``: the N of each code, or the label itself where it is a string: an XPlane's ``tpu:N``)."""
    stream, correlation = np.asarray(stream, dtype=np.int64), np.asarray(correlation, dtype=np.int64)
    return {
        "stream": pd.arrays.IntegerArray(np.maximum(stream, 0), stream < 0),
        "correlation": pd.arrays.IntegerArray(np.maximum(correlation, 0), correlation < 0),
        "device": (device_codes, [d if isinstance(d, str) else f"gpu:{d}" for d in list(devices)]),
    }


def set_rank(events: pd.DataFrame, rank: int | None) -> None:
    """A single-rank reader's last columns, in place: ``rank`` (the same for every event; missing when None)
    and ``bookkeeping`` (none of its events is the profiler's own)."""
    events["rank"] = constant_int(len(events), rank)
    events["bookkeeping"] = np.zeros(len(events), dtype=bool)


def constant_int(length: int, value: int | None) -> pd.arrays.IntegerArray:
    """A nullable Int64 column holding one value (or missing) ``length`` times."""
    return pd.arrays.IntegerArray(
        np.full(length, 0 if value is None else value, dtype=np.int64), np.full(length, value is None)
    )


def build_threads(
    events: pd.DataFrame,
    process_names: Mapping[int, str],
    thread_names: Mapping[tuple[int, int], str],
    extra: Sequence[tuple[int, int]] = (),
) -> pd.DataFrame:
    """One row per (pid, tid) seen in events or named by metadata, with process and thread names."""
    pid, tid = events["pid"].to_numpy(), events["tid"].to_numpy()
    if len(pid) and np.all(pid[1:] >= pid[:-1]):  # events come sorted by (pid, tid): take each run's first
        first = np.concatenate(([True], (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])))
        pairs = pd.DataFrame({"pid": pid[first], "tid": tid[first]})
    else:
        pairs = events[["pid", "tid"]].drop_duplicates()
    known = pd.DataFrame(list(thread_names) + list(extra), columns=["pid", "tid"], dtype="int64")
    pairs = pd.concat([pairs, known], ignore_index=True).drop_duplicates().sort_values(["pid", "tid"])
    pids = pairs["pid"].tolist()
    tids = pairs["tid"].tolist()
    return pd.DataFrame(
        {
            "pid": np.asarray(pids, dtype=np.int64),
            "tid": np.asarray(tids, dtype=np.int64),
            "process_name": pd.array([process_names.get(p) for p in pids], dtype="str"),
            "thread_name": pd.array(
                [thread_names.get((p, t)) for p, t in zip(pids, tids, strict=True)], dtype="str"
            ),
        }
    )
