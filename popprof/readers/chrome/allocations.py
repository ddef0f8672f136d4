"""The ``allocations`` table: PyTorch profiler's ``[memory]`` instant events (``profile_memory=True``).

Kineto writes one instant event named ``[memory]`` per allocator call, on the thread that made it, with args
``Bytes`` (the block: positive allocated, negative freed), ``Device Type`` and ``Device Id`` (c10's
``DeviceType``: 0 CPU, 1 CUDA, 6 HIP; pytorch/pytorch ``c10/core/DeviceType.h``) and, since about 2022,
``Total Allocated`` and ``Total Reserved`` (the caching allocator's totals after the call) and ``Addr``
(the block's address). The main pass
keeps these as rows of ``events`` without args; their args are read when the table is first used, from the
events' ``args`` when the profile was read with them, else by a scan of the file's bytes for the name, each
match's object parsed alone (a layout it cannot match to the events falls back to reading the file again with
args; either way the file must still be the one read). Each row names the ``event_id`` of its ``[memory]`` row
in ``events``: its rank and the operator that allocated (that row's parent) are read there, so a rank given
later is not stale here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson
import pandas as pd

from ...io.files import ChangedWhileRead, open_binary, snapshot
from ...io.jsonbytes import object_end

#: The instant event's name.
MEMORY_EVENT = "[memory]"

#: The name member of such an event, as bytes; how far before it its object may start; the scan's block.
_NAME = re.compile(rb'"name"\s*:\s*"\[memory\]"')
_HEAD = 4096
_SCAN_BLOCK = 8 << 20

#: c10::DeviceType values that are GPUs (CUDA, HIP); others keep c10's name.
_DEVICE_TYPES = {0: "cpu", 1: "gpu", 6: "gpu", 12: "xpu", 13: "mps", 18: "ipu", 19: "mtia"}


def memory_rows(events: pd.DataFrame) -> np.ndarray:
    """Positions of the ``[memory]`` rows of ``events`` (none without that name: one look at the categories)."""
    names = events["name"]
    if isinstance(names.dtype, pd.CategoricalDtype) and MEMORY_EVENT not in names.cat.categories:
        return np.empty(0, dtype=np.int64)
    return np.flatnonzero((names == MEMORY_EVENT).to_numpy(dtype=bool, na_value=False))


def _device(kind: object, index: object) -> str | None:
    if not isinstance(kind, int):
        return None
    word = _DEVICE_TYPES.get(kind, f"device-type-{kind}")
    return word if word == "cpu" else f"{word}:{index if isinstance(index, int) else 0}"


def decoded_args(texts: pd.Series) -> list[dict]:
    """Args written as JSON text, each as a dict (``{}`` where missing or not an object)."""
    out = []
    for text in texts.tolist():
        try:
            value = orjson.loads(text) if isinstance(text, str) else {}
        except orjson.JSONDecodeError:
            value = {}
        out.append(value if isinstance(value, dict) else {})
    return out


def allocation_frame(events: pd.DataFrame, rows: np.ndarray, decoded: list[dict]) -> pd.DataFrame:
    """The table from the ``[memory]`` rows of ``events`` (positions ``rows``) and their args, one dict each."""

    def whole(key: str) -> pd.array:
        return pd.array([v.get(key) if type(v.get(key)) is int else None for v in decoded], dtype="Int64")

    mem = events.iloc[rows]
    return pd.DataFrame(
        {
            "event_id": mem["event_id"].to_numpy(),
            "pid": mem["pid"].to_numpy(),
            "tid": mem["tid"].to_numpy(),
            "ts_us": mem["start_us"].to_numpy(),
            "device": pd.Categorical([_device(v.get("Device Type"), v.get("Device Id")) for v in decoded]),
            "bytes": whole("Bytes"),
            "total_allocated": whole("Total Allocated"),
            "total_reserved": whole("Total Reserved"),
            "addr": whole("Addr"),
        }
    )


def on_the_work_s_gpu(table: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """``table`` with its GPU rows named as the trace's GPU work names their GPU, for a trace of AMD's roctracer.

    roctracer numbers a kernel's or copy's device by its HSA agent, and HSA lists the host's CPUs first: on a
    two-socket host the first GPU is 2 (ROCm/roctracer#98; pytorch/kineto#926 kept roctracer's number), while
    PyTorch's allocator writes HIP's device index (0). When the trace's GPU work is on one GPU and the
    allocator's GPU rows name one GPU, they are the one GPU the process used: the rows take the work's name, so
    that the memory and the time account name one device. Otherwise (several GPUs on either side: which agent
    is which index depends on ``HIP_VISIBLE_DEVICES``) the rows keep the allocator's numbering."""
    work = {str(d) for d in events["device"].dropna().unique() if str(d).startswith("gpu:")}
    mine = {str(d) for d in table["device"].dropna().unique() if str(d).startswith("gpu:")}
    if len(work) != 1 or len(mine) != 1 or work == mine:
        return table
    table["device"] = table["device"].cat.rename_categories({mine.pop(): work.pop()})
    return table


def allocations_of(events: pd.DataFrame, agent_numbers: bool = False) -> pd.DataFrame:
    """The table of a profile read with args (its events hold the ``[memory]`` events' args); ``agent_numbers``:
    the trace's GPU work numbers its GPUs as roctracer does (:func:`on_the_work_s_gpu`)."""
    rows = memory_rows(events)
    table = allocation_frame(events, rows, decoded_args(events["args"].iloc[rows]))
    return on_the_work_s_gpu(table, events) if agent_numbers else table


def allocations_read_on_use(
    path: Path,
    before: tuple | None,
    events: pd.DataFrame,
    read_again: Callable[[Path], pd.DataFrame],
    agent_numbers: bool = False,
) -> pd.DataFrame:
    """The table of a read without args: the ``[memory]`` events' args found by one scan of the file's bytes
    (:func:`scanned_args`), else (a layout the scan cannot match to ``events`` one by one) from the events of
    the file read again with args (``read_again``, the reader's). A file changed since the first read is
    :class:`ChangedWhileRead`."""
    rows = memory_rows(events)
    mem = events.iloc[rows]
    args = scanned_args(
        path, before, mem["pid"].to_numpy(), mem["tid"].to_numpy(), mem["start_us"].to_numpy()
    )
    if args is None:
        args = _args_read_again(path, before, mem, read_again)
    table = allocation_frame(events, rows, args)
    return on_the_work_s_gpu(table, events) if agent_numbers else table


def scanned_args(
    path: Path, before: tuple | None, pid: np.ndarray, tid: np.ndarray, ts: np.ndarray
) -> list[dict] | None:
    """The args (one dict each) of the file's ``[memory]`` events in the order of the rows given by their
    ``pid``, ``tid`` and ``ts`` (the events table's order), from one streamed scan of its bytes for the name
    (each match's object parsed alone); None when they do not match those rows one by one (a writer that puts
    the name far from the object's start, ids written as text, times the reader converts)."""
    found: list[tuple[object, object, object, str]] = []
    # no JSON guard: each object orjson parses is at most a block; a gzip cut off before its end marker ends where
    # its data ends, as the main read of the file took it (the events before the cut, a read problem)
    with open_binary(path, before, cut_off_ends=True) as handle:
        carry = b""
        while True:
            chunk = handle.read(_SCAN_BLOCK)
            data = carry + chunk
            done = 0
            for match in _NAME.finditer(data):
                start = data.rfind(b"{", max(done, match.start() - _HEAD), match.start())
                event, end = _object_at(data, start, match.end()) if start >= 0 else (None, -1)
                if end < 0:
                    if chunk:  # the object goes on in the next block
                        break
                    return None
                if not isinstance(event, dict) or event.get("name") != MEMORY_EVENT:
                    return None
                found.append((event.get("pid"), event.get("tid"), event.get("ts"), event.get("args")))
                done = end
            if not chunk:
                break
            carry = data[max(done, len(data) - _HEAD) :]
    if snapshot(path) != before:
        raise ChangedWhileRead(path)
    if len(found) != len(ts) or not all(isinstance(v, (int, float)) for f in found for v in f[:3]):
        return None
    got = np.array([f[:3] for f in found], dtype=np.float64).reshape(-1, 3)
    order = np.lexsort((got[:, 2], got[:, 1], got[:, 0]))  # stable: ties keep the file's order
    if not (
        np.array_equal(got[order, 0], pid)
        and np.array_equal(got[order, 1], tid)
        and np.array_equal(got[order, 2], ts)
    ):
        return None
    return [found[i][3] if isinstance(found[i][3], dict) else {} for i in order.tolist()]


def _object_at(data: bytes, start: int, after: int) -> tuple[object, int]:
    """The JSON object opening at ``data[start]`` and its end, or ``(None, -1)`` when ``data`` ends first. An
    allocator event closes at the second ``}`` after its name (its args hold numbers only; the first without
    args), which orjson checks; any other object is measured by :func:`object_end` (strings, nesting)."""
    first = data.find(b"}", after) + 1
    second = data.find(b"}", first) + 1 if first > 0 else 0
    for close in (second, first):  # after its args, or an event without args
        if close > 0:
            try:
                return orjson.loads(data[start:close]), close
            except orjson.JSONDecodeError:
                pass
    end = object_end(data, start)
    if end < 0:
        return None, -1
    try:
        return orjson.loads(data[start:end]), end
    except orjson.JSONDecodeError:
        return None, end


def _args_read_again(
    path: Path, before: tuple | None, mem: pd.DataFrame, read_again: Callable[[Path], pd.DataFrame]
) -> list[dict]:
    """The args of the ``[memory]`` rows ``mem`` from the file read again with args, its ``[memory]`` rows
    matched to ``mem``'s one by one (the same reader sorts both the same way)."""
    if snapshot(path) != before:
        raise ChangedWhileRead(path)
    again = read_again(path)
    if snapshot(path) != before:
        raise ChangedWhileRead(path)
    second = again.iloc[memory_rows(again)]
    same = len(second) == len(mem) and all(
        np.array_equal(mem[c].to_numpy(), second[c].to_numpy()) for c in ("pid", "tid", "start_us")
    )
    if not same:
        raise ChangedWhileRead(path)
    return decoded_args(second["args"])
