"""Host-device copies: per device and copy kind, how many, how many bytes, how long, how fast.

The copies are the time account's (:mod:`popprof.metrics.account`), on a GPU trace: the device events the
device map puts in ``host_io`` (host <-> device copies) or ``other`` (memsets, on-device copies), the
account's ``copies`` layer, a copy nested in another device event counted too (its time is that event's in
the account). An IPU's host I/O is its ``stream_copies``, not these. Peer-to-peer copies are communication
there (the map's ``exchange``) and not here. Each copy's kind comes from its name, as Kineto (CUPTI,
roctracer) writes it: ``Memcpy HtoD (Pageable -> Device)``, ``Memcpy DtoH (Device -> Pinned)``,
``Memcpy DtoD (Device -> Device)``, ``Memset (Device)``; AMD's ``Memcpy HtoD (Host -> Device)`` does not say
which host memory. A kind is a direction (``HtoD``, ``DtoH``, ``DtoD``, ``HtoH``, ``memset``, ``other``: a
copy the name does not place, such as MTIA's ``dma`` requests) and, for a copy to or from the host, the host
memory (``pageable``, ``pinned``, ``unknown``).

Per (rank, device, kind), :func:`copy_kinds` gives:

- ``count``: the transfers, :func:`transfer_mask`'s. A GPU's copy event is one transfer. On a TPU (the XPlane
  reader) XLA's asynchronous copy is two ops, a ``copy-start`` (under a microsecond) and the ``copy-done`` that
  waits for it, and the pair is one transfer, counted at its ``copy-done`` (in the ``copy-done``'s kind); a
  ``copy-start`` whose ``copy-done`` is not in the profile (cut at its end) and a ``copy-done`` whose
  ``copy-start`` is not (cut at its start) are one transfer each; ``ops``: the copy events, both ops of a pair;
- ``time_us`` (the copies' durations summed: their device time, a pair's ``copy-start`` and ``copy-done``
  alike) and ``bytes`` (the ``bytes`` of their args; missing when the trace was read without args or records
  none);
- ``gbps``: achieved bandwidth, ``bytes`` / ``time_us`` (GB/s, 1e9 bytes per second);
- ``copies_us``: the kind's part of the account's ``copies`` (copy time with no compute and no communication
  running on the device: :func:`popprof.metrics.account.copies_spans`, split here by kind). Where copies of
  two kinds run at once, the time goes to the kind first in :data:`KIND_ORDER` (pageable copies first), so the
  kinds' ``copies_us`` sum to the account's ``copies`` of the device: one definition of copy time;
- ``copy_gbps_mean`` / ``copy_gbps_max``: of each copy's own bandwidth (the args' ``memory bandwidth (GB/s)``,
  which Kineto writes as bytes / duration; bytes / duration where it is missing).

:func:`hta_bandwidth` is HolisticTraceAnalysis's memory-bandwidth summary (HTA 0.5.0's
``get_memory_bw_summary``) where it is the same figure: HTA groups the memory work of a rank by the first 11
characters of its name (``Memcpy HtoD``, ``Memcpy DtoH``, ``Memcpy DtoD``; ``Memset``), adds each copy's
bandwidth while it runs and describes the positive points of that series per group. Where no two copies of a
group overlap or touch, those points are the copies' own bandwidths (``count``, ``mean``, ``min``, ``max`` of
them), over HTA's copies (its window leaves the last profiler step out); where they do, HTA's points are
sums of concurrent copies and ``concurrent`` says so (``docs/traces.md``).
"""

from __future__ import annotations

import re
from collections import deque

import numpy as np
import orjson
import pandas as pd

from ..model.errors import NotEvaluated
from ..model.profile import Profile
from ..trace import intervals as im
from ..trace import masks
from ..trace.spans import intersect_intervals, merge_intervals, subtract_intervals
from .account import copies_spans

#: The device categories of the account's ``copies`` layer.
COPY_CATEGORIES: tuple[str, ...] = ("host_io", "other")
#: The account's name of a GPU its trace does not name.
GPU = "gpu"
#: Host memory words: the driver stages pageable memory; pinned (page-locked) memory is copied directly.
PAGEABLE, PINNED, DEVICE, UNKNOWN = "pageable", "pinned", "device", "unknown"
#: Directions of copies between the host and a device.
HOST_DIRECTIONS: tuple[str, ...] = ("HtoD", "DtoH", "HtoH")
#: Kinds in the order copy time shared by two kinds goes to the first (``copies_us``), and the tables' order.
KIND_ORDER: tuple[str, ...] = (
    "HtoD pageable",
    "DtoH pageable",
    "HtoH pageable",
    "HtoD unknown",
    "DtoH unknown",
    "HtoH unknown",
    "HtoD pinned",
    "DtoH pinned",
    "HtoH pinned",
    "DtoD",
    "memset",
    "other",
)
COLUMNS = [
    "rank",
    "device",
    "kind",
    "direction",
    "memory",
    "count",
    "ops",
    "bytes",
    "time_us",
    "gbps",
    "copies_us",
    "copy_gbps_mean",
    "copy_gbps_max",
]
#: Columns of :func:`hta_bandwidth`.
HTA_COLUMNS = ["rank", "name", "count", "mean", "min", "max", "concurrent"]

_MEMCPY = re.compile(r"Memcpy ?(HtoD|DtoH|DtoD|HtoH|HtoA|AtoH|AtoD|DtoA|AtoA)\b(?: ?\(([^)]*)\))?")
_MEMSET = re.compile(r"Memset\b")
#: A side of a copy as Kineto names it -> host memory word (Array: a CUDA array, device memory).
_SIDES = {"pageable": PAGEABLE, "pinned": PINNED, "device": DEVICE, "array": DEVICE}
#: The key of a TPU op record (the XPlane reader's ``xplane.tpu_ops``) naming the ``copy-start`` op a
#: ``copy-done`` op waits for.
COPY_START_KEY = "copy_start"
#: The XPlane reader's name of a TPU copy between host and device memory: ``Memcpy HtoD (<op>)``.
_WRAPPED = re.compile(r"Memcpy (?:HtoD|DtoH|DtoD|HtoH|PtoP) \((.+)\)", re.DOTALL)
_ARG_BYTES = "bytes"
_ARG_BANDWIDTH = "memory bandwidth (GB/s)"


def copy_kind(name: str) -> tuple[str, str, str]:
    """``(kind, direction, memory)`` of one copy's name (``("HtoD pageable", "HtoD", "pageable")``)."""
    found = _MEMCPY.search(name)
    if found is None:
        if _MEMSET.search(name):
            return "memset", "memset", DEVICE
        return "other", "other", UNKNOWN
    direction = found.group(1).replace("A", "D")  # a CUDA array is device memory
    sides = [s.strip().lower() for s in (found.group(2) or "").split("->")] if found.group(2) else []
    words = [_SIDES.get(s, UNKNOWN) for s in sides]
    if direction == "DtoD":
        return "DtoD", "DtoD", DEVICE
    host = {"HtoD": words[:1], "DtoH": words[1:2], "HtoH": words}[direction]
    memory = PAGEABLE if PAGEABLE in host else PINNED if host and all(w == PINNED for w in host) else UNKNOWN
    return f"{direction} {memory}", direction, memory


def copy_rows(profile: Profile) -> pd.DataFrame:
    """Every copy, one row each: the device events (bookkeeping left out, timed) in the account's copies
    categories, a copy nested in another device event too. Columns ``rank`` (-1 unknown), ``device``
    (``gpu`` when the trace names none, as the account), ``kind``, ``direction``, ``memory``, ``row`` (in
    ``events``), ``start_us``, ``end_us``,
    ``nested`` (inside another device event: its time is that event's in the account), ``bytes`` and
    ``bandwidth_gbps`` (from the args; missing without them), ``transfer`` (the copy counts as a transfer:
    :func:`transfer_mask`). Empty without copies; cached per profile."""
    return profile.cached("copies.rows", lambda: _copy_rows(profile))


_ROW_COLUMNS = ["rank", "device", "kind", "direction", "memory", "row", "start_us", "end_us", "nested"]


def _copy_positions(profile: Profile) -> np.ndarray | None:
    """Positions in ``events`` of the copy events (module docstring), or None when the trace has none; cached.
    The category codes find the candidates; the other conditions are read on those rows alone, so a trace
    with few copies costs one comparison of codes."""
    return profile.cached("copies.positions", lambda: _find_positions(profile))


def _find_positions(profile: Profile) -> np.ndarray | None:
    events = profile.get("events")
    if events is None or events.empty or "device_category" not in events.columns:
        return None
    if not masks.stream_mask(profile).any():  # not a GPU trace: an IPU's host I/O is its stream copies
        return None
    category = events["device_category"].array
    wanted = [i for i, c in enumerate(category.categories) if c in COPY_CATEGORIES]
    if not wanted:
        return None
    lut = np.zeros(len(category.categories) + 1, dtype=bool)  # by code; the last entry: code -1 (none)
    lut[wanted] = True
    rows = np.flatnonzero(lut[np.asarray(category.codes)])
    if rows.size == 0:
        return None
    keep = masks.device_activity_mask(profile)[rows] & ~masks.bookkeeping_mask(profile)[rows]
    keep &= np.isfinite(events["start_us"].to_numpy(dtype=np.float64)[rows])
    keep &= np.isfinite(events["dur_us"].to_numpy(dtype=np.float64)[rows])
    rows = rows[keep]
    return rows if rows.size else None


def _activities(profile: Profile) -> list[im.DeviceActivity]:
    """The account's device activity (its top-level device events), when the trace has copies."""
    if _copy_positions(profile) is None:
        return []
    try:
        return im.device_activities(profile, by="device")
    except NotEvaluated:
        return []


def _kind_codes(names: pd.Categorical, picked: np.ndarray) -> np.ndarray:
    """The index in :data:`KIND_ORDER` of the names at positions ``picked`` of ``names``: one regular
    expression per distinct name among them (a few), none per event nor per name of the whole trace."""
    codes = np.asarray(names.codes)[picked]
    distinct, inverse = np.unique(codes, return_inverse=True)
    other = KIND_ORDER.index("other")
    labels = names.categories
    lut = np.array(
        [KIND_ORDER.index(copy_kind(str(labels[c]))[0]) if c >= 0 else other for c in distinct.tolist()],
        dtype=np.int64,
    )
    return lut[inverse.reshape(-1)]


def _copy_rows(profile: Profile) -> pd.DataFrame:
    found = _copy_arrays(profile)
    if found is None:
        return pd.DataFrame(columns=[*_ROW_COLUMNS, "bytes", "bandwidth_gbps", "transfer"])
    triples = [copy_kind_of(k) for k in KIND_ORDER]
    code = found["kind"]
    return pd.DataFrame(
        {
            "rank": found["rank"],
            "device": found["device"],
            "kind": pd.Categorical.from_codes(code, categories=list(KIND_ORDER)),
            "direction": np.array([t[1] for t in triples], dtype=object)[code],
            "memory": np.array([t[2] for t in triples], dtype=object)[code],
            "row": found["row"],
            "start_us": found["start_us"],
            "end_us": found["end_us"],
            "nested": found["nested"],
            "bytes": found["bytes"],
            "bandwidth_gbps": found["bandwidth_gbps"],
            "transfer": found["transfer"],
        }
    )


def _copy_arrays(profile: Profile) -> dict[str, np.ndarray] | None:
    """The columns of :func:`copy_rows` as arrays (``kind`` as its index in :data:`KIND_ORDER`), None without
    copies; cached (the summary reads these, not the frame)."""
    return profile.cached("copies.arrays", lambda: _find_arrays(profile))


def _find_arrays(profile: Profile) -> dict[str, np.ndarray] | None:
    rows = _copy_positions(profile)
    if rows is None:
        return None
    events = profile.events
    start = events["start_us"].to_numpy(dtype=np.float64)[rows]
    device = np.full(rows.size, GPU, dtype=object)  # the account's name of a GPU the trace does not name
    if "device" in events.columns:
        named = events["device"].iloc[rows].to_numpy(dtype=object)
        known = pd.notna(named)
        device[known] = [str(d) for d in named[known]]
    top = np.zeros(len(events), dtype=bool)
    for act, mine in _activity_copies(profile):  # the account's events: top-level device events
        top[act.rows[mine]] = True
    size, rate = _args(profile, rows)
    rank = masks.rank_array(profile)[rows]
    return {
        "rank": rank,
        "device": device,
        "kind": _kind_codes(events["name"].array, rows),
        "row": rows,
        "start_us": start,
        "end_us": start + events["dur_us"].to_numpy(dtype=np.float64)[rows],
        "nested": ~top[rows],
        "bytes": size,
        "bandwidth_gbps": rate,
        "transfer": _transfers(profile, rows, rank, device, start),
    }


def transfer_mask(profile: Profile) -> np.ndarray:
    """Per copy of :func:`copy_rows` (same order), whether it counts as a transfer (``count``, the module
    docstring): every copy but the ``copy-start`` of an XLA asynchronous copy whose ``copy-done`` the profile
    holds. Empty without copies."""
    found = _copy_arrays(profile)
    return np.zeros(0, dtype=bool) if found is None else found["transfer"].copy()


def async_copy_pairs(profile: Profile) -> dict[tuple[str, str], str]:
    """Per (device, ``copy-done`` op) of a TPU profile, the ``copy-start`` op it waits for, as the XPlane reader
    records it (the op record's ``copy_start``: the operand of the ``copy-done``'s HLO text); empty for any
    other profile (a GPU's copy is one event)."""
    from .tpu_operations import op_records

    records = op_records(profile)
    if records.empty or COPY_START_KEY not in records.columns:
        return {}
    out: dict[tuple[str, str], str] = {}
    for device, name, start in zip(
        records["device"].tolist(), records["name"].tolist(), records[COPY_START_KEY].tolist(), strict=True
    ):
        if isinstance(start, str) and start:
            out[(str(device), str(name))] = start
    return out


def _transfers(
    profile: Profile, rows: np.ndarray, rank: np.ndarray, device: np.ndarray, start: np.ndarray
) -> np.ndarray:
    """Per copy at ``rows`` of ``events``, whether it counts as a transfer: per (rank, device) and pair of
    :func:`async_copy_pairs`, in time order (a ``copy-start`` before a ``copy-done`` at the same time), each
    ``copy-done`` closes the earliest open ``copy-start`` of its pair, which then does not count; the
    ``copy-done`` counts, and so do a ``copy-start`` left open and a ``copy-done`` with none open."""
    out = np.ones(rows.size, dtype=bool)
    pairs = async_copy_pairs(profile)
    if not pairs or rows.size == 0:
        return out
    role: dict[tuple[str, str], tuple[int, bool]] = {}  # (device, op) -> (pair, is its copy-done)
    for number, ((dev, done), begin) in enumerate(pairs.items()):
        role[(dev, done)] = (number, True)
        role.setdefault((dev, begin), (number, False))
    names = profile.events["name"].array
    distinct, name_index = np.unique(np.asarray(names.codes)[rows], return_inverse=True)
    labels = names.categories
    ops = [_op_name(str(labels[c])) if c >= 0 else "" for c in distinct.tolist()]
    devices, device_index = np.unique(device.astype(str), return_inverse=True)
    # one lookup per (device, name) met, none per copy
    combos, combo_index = np.unique(
        device_index.reshape(-1) * len(ops) + name_index.reshape(-1), return_inverse=True
    )
    looked = [
        role.get((str(devices[c // len(ops)]), ops[c % len(ops)]), (-1, False)) for c in combos.tolist()
    ]
    pair = np.array([r[0] for r in looked], dtype=np.int64)[combo_index.reshape(-1)]
    closes = np.array([r[1] for r in looked], dtype=bool)[combo_index.reshape(-1)]
    picked = np.flatnonzero(pair >= 0)
    _, rank_index = np.unique(rank, return_inverse=True)
    rank_index = rank_index.reshape(-1)
    # per (rank, pair) in time order, a copy-start before a copy-done at the same time
    picked = picked[np.lexsort((closes[picked], start[picked], pair[picked], rank_index[picked]))]
    group = rank_index[picked] * len(pairs) + pair[picked]
    open_starts: deque[int] = deque()
    previous = -1
    for i, g, c in zip(picked.tolist(), group.tolist(), closes[picked].tolist(), strict=True):
        if g != previous:
            open_starts.clear()
            previous = g
        if not c:
            open_starts.append(i)
        elif open_starts:
            out[open_starts.popleft()] = False
    return out


def _op_name(name: str) -> str:
    """The TPU op of a copy event's name: ``copy-done.2`` of ``Memcpy HtoD (copy-done.2)``, else the name."""
    found = _WRAPPED.fullmatch(name)
    return found.group(1) if found else name


def _activity_copies(profile: Profile) -> list[tuple[im.DeviceActivity, np.ndarray]]:
    """Each device's activity (the account's) that holds copies, with the mask of its copy events; cached."""

    def build() -> list[tuple[im.DeviceActivity, np.ndarray]]:
        out = []
        for act in _activities(profile):
            mine = act.in_categories(COPY_CATEGORIES)
            if act.rows is not None and mine.any():
                out.append((act, mine))
        return out

    return profile.cached("copies.activities", build)


def copy_kind_of(kind: str) -> tuple[str, str, str]:
    """``(kind, direction, memory)`` of a kind of :data:`KIND_ORDER`."""
    if " " in kind:
        direction, memory = kind.split(" ")
        return kind, direction, memory
    return kind, kind, DEVICE if kind in ("DtoD", "memset") else UNKNOWN


def _args(profile: Profile, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``bytes`` and ``memory bandwidth (GB/s)`` of the copies' args (NaN where missing or not read)."""
    size = np.full(len(rows), np.nan)
    rate = np.full(len(rows), np.nan)
    events = profile.events
    if "args" not in events.columns or len(rows) == 0:
        return size, rate
    texts = events["args"].array[rows]
    for i, text in enumerate(texts.tolist()):  # the copies only: a few hundred at most in real traces
        try:
            value = orjson.loads(text) if isinstance(text, str) else None
        except orjson.JSONDecodeError:
            continue
        if not isinstance(value, dict):
            continue
        b, r = value.get(_ARG_BYTES), value.get(_ARG_BANDWIDTH)
        if isinstance(b, (int, float)) and not isinstance(b, bool):
            size[i] = float(b)
        if isinstance(r, (int, float)) and not isinstance(r, bool):
            rate[i] = float(r)
    return size, rate


def copy_kinds(profile: Profile) -> pd.DataFrame:
    """Per (rank, device, kind): the figures of :data:`COLUMNS` (module docstring), in rank, device and
    :data:`KIND_ORDER` order; ``rank`` missing when unknown. Empty without copies."""
    records = copy_records(profile)
    frame = pd.DataFrame(records, columns=COLUMNS)
    frame["rank"] = pd.array(frame["rank"].tolist(), dtype="Int64")
    for column in ("count", "ops"):
        frame[column] = frame[column].astype(np.int64)
    for column in ("bytes", "time_us", "gbps", "copies_us", "copy_gbps_mean", "copy_gbps_max"):
        frame[column] = frame[column].astype(np.float64)  # None -> NaN
    return frame


def copy_records(profile: Profile) -> list[dict]:
    """:func:`copy_kinds` as JSON-ready rows (``rank`` None when unknown, a missing figure None), built once per
    profile (the summary and the rule read these; each call gets its own dicts)."""
    return [dict(row) for row in profile.cached("copies.records", lambda: _copy_records(profile))]


def _copy_records(profile: Profile) -> list[dict]:
    rows = _copy_arrays(profile)
    if rows is None:
        return []
    # one group per (rank, device, kind), numbered in that order: sums by bincount, no Python per copy
    rank_values, rank_index = np.unique(rows["rank"], return_inverse=True)
    device_values, device_index = np.unique(rows["device"].astype(str), return_inverse=True)
    key = (rank_index * len(device_values) + device_index) * len(KIND_ORDER) + rows["kind"]
    groups, group = np.unique(key, return_inverse=True)
    n = groups.size
    dur = rows["end_us"] - rows["start_us"]
    size = rows["bytes"]
    own = rows["bandwidth_gbps"].copy()
    fill = np.isnan(own) & (dur > 0) & ~np.isnan(size)
    own[fill] = size[fill] / (dur[fill] * 1e3)  # a copy without the arg: its bytes over its duration
    ops = np.bincount(group, minlength=n)
    count = np.bincount(group, weights=rows["transfer"].astype(np.float64), minlength=n).astype(np.int64)
    time = np.bincount(group, weights=dur, minlength=n)
    missing = np.bincount(group, weights=np.isnan(size).astype(np.float64), minlength=n) > 0
    total = np.where(missing, np.nan, np.bincount(group, weights=np.nan_to_num(size), minlength=n))
    seen = ~np.isnan(own)
    seen_count = np.bincount(group, weights=seen.astype(np.float64), minlength=n)
    gbps = achieved_gbps(total, time)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(
            seen_count > 0,
            np.bincount(group, weights=np.where(seen, own, 0.0), minlength=n) / seen_count,
            np.nan,
        )
    top = np.full(n, np.nan)
    np.fmax.at(top, group, own)  # fmax passes over NaN
    exclusive = _exclusive_by_kind(profile)
    out = []
    for g, c, o, b, t, r, m, x in zip(
        groups.tolist(),
        count.tolist(),
        ops.tolist(),
        total.tolist(),
        time.tolist(),
        gbps.tolist(),
        mean.tolist(),
        top.tolist(),
        strict=True,
    ):
        rank = int(rank_values[g // (len(device_values) * len(KIND_ORDER))])
        device = str(device_values[(g // len(KIND_ORDER)) % len(device_values)])
        kind, direction, memory = copy_kind_of(KIND_ORDER[g % len(KIND_ORDER)])
        out.append(
            {
                "rank": None if rank < 0 else rank,
                "device": device,
                "kind": kind,
                "direction": direction,
                "memory": memory,
                "count": c,
                "ops": o,
                "bytes": _plain(b),
                "time_us": t,
                "gbps": _plain(r),
                "copies_us": exclusive.get((rank, device, kind), 0.0),
                "copy_gbps_mean": _plain(m),
                "copy_gbps_max": _plain(x),
            }
        )
    return out


def achieved_gbps(total_bytes: np.ndarray, time_us: np.ndarray) -> np.ndarray:
    """Achieved bandwidth in GB/s (1e9 bytes per second): bytes over device time; NaN without time or bytes."""
    total_bytes, time_us = np.asarray(total_bytes, dtype=np.float64), np.asarray(time_us, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(time_us > 0, total_bytes / (time_us * 1e3), np.nan)


def pooled_copy_records(records: list[dict]) -> list[dict]:
    """:func:`copy_records` summed over devices, one row per kind in the records' order (what the summary's
    text shows for a run of many devices): ``devices`` (how many have the kind), ``count``, ``ops``, ``bytes`` (None
    when a device's are unknown), ``time_us``, ``gbps`` (the pooled bytes over the pooled time)."""
    pooled: dict[str, dict] = {}
    for r in records:
        row = pooled.setdefault(
            r["kind"], {"kind": r["kind"], "devices": 0, "count": 0, "ops": 0, "bytes": 0.0, "time_us": 0.0}
        )
        row["devices"] += 1
        row["count"] += r["count"]
        row["ops"] += r.get("ops", r["count"])
        row["bytes"] = None if row["bytes"] is None or r["bytes"] is None else row["bytes"] + r["bytes"]
        row["time_us"] += r["time_us"]
    for row in pooled.values():
        total = np.nan if row["bytes"] is None else row["bytes"]
        row["gbps"] = _plain(float(achieved_gbps(total, row["time_us"])))
    return list(pooled.values())


def _plain(value: float) -> float | None:
    """A figure as JSON holds it: None where missing."""
    return None if value != value else value


def _exclusive_by_kind(profile: Profile) -> dict[tuple[int, str, str], float]:
    """Per (rank, device, kind): its part of the account's ``copies`` (:func:`exclusive_spans`' length)."""
    return {key: float((end - start).sum()) for key, (start, end) in exclusive_spans(profile).items()}


def exclusive_spans(profile: Profile) -> dict[tuple[int, str, str], tuple[np.ndarray, np.ndarray]]:
    """Per (rank (-1 unknown), device, kind): the kind's part of the account's ``copies`` as sorted, disjoint
    intervals: the device's copy time with no compute or communication running, time shared by two kinds
    given to the first in :data:`KIND_ORDER`. Cached per profile."""
    return profile.cached("copies.exclusive", lambda: _exclusive_spans(profile))


def _exclusive_spans(profile: Profile) -> dict[tuple[int, str, str], tuple[np.ndarray, np.ndarray]]:
    out: dict[tuple[int, str, str], tuple[np.ndarray, np.ndarray]] = {}
    parts = copies_spans(profile)  # the account's copies, per device: split here by kind
    for act, mine in _activity_copies(profile):
        key = (-1 if act.rank is None else act.rank, act.device or GPU)
        left = parts.get(key)
        if left is None:
            continue
        start, end = act.start[mine], act.end[mine]
        kinds = _kind_codes(act.name, mine)
        for code in np.unique(kinds).tolist():  # in KIND_ORDER: the first kind takes shared time
            taken = intersect_intervals(*merge_intervals(start[kinds == code], end[kinds == code]), *left)
            out[(*key, KIND_ORDER[code])] = taken
            left = subtract_intervals(*left, *taken)
    return out


def device_copies(profile: Profile) -> dict[tuple[int, str], float]:
    """The account's ``copies`` per (rank (-1 unknown), device) as :func:`copy_kinds` sums it."""
    kinds = copy_kinds(profile)
    out: dict[tuple[int, str], float] = {}
    for row in kinds.itertuples(index=False):
        key = (-1 if pd.isna(row.rank) else int(row.rank), str(row.device))
        out[key] = out.get(key, 0.0) + float(row.copies_us)
    return out


def hta_name(name: str) -> str:
    """HTA's memory kind of a memory work item's name: ``Memset``, the name's first 11 characters for a
    ``Memcpy`` (``Memcpy HtoD``), ``Memcpy Unknown`` otherwise (HTA 0.5.0, ``get_memory_kernel_type``)."""
    if name.startswith("Memset"):
        return "Memset"
    if not name.startswith("Memcpy"):
        return "Memcpy Unknown"
    return name[:11]


def hta_bandwidth(profile: Profile) -> pd.DataFrame:
    """HTA's memory-bandwidth summary where it is the same figure (module docstring), over HTA's copies: the
    memory work of :func:`popprof.metrics.devices.device_work` (HTA's window: on a stream, the last profiler
    step left out when the trace marks two or more). Per (rank, HTA kind): the ``count``, ``mean``, ``min``
    and ``max`` of the copies' own positive bandwidths (the args'), and ``concurrent``: two copies of the kind
    on the rank overlap or touch (HTA's times: rounded, a zero duration as 1 us), so HTA's points are sums of
    them, not these. Empty without copies whose args were read."""
    from .devices import device_work

    rows = copy_rows(profile)
    work = device_work(profile)
    if rows.empty or work is None or rows["bandwidth_gbps"].isna().all():
        return pd.DataFrame(columns=HTA_COLUMNS)
    work = work[np.asarray(work["hta_kernel_type"] == "MEMORY", dtype=bool)]
    events = profile.events
    corr = events["correlation"].array[rows["row"].to_numpy()].to_numpy(dtype=np.float64, na_value=np.nan)
    own = pd.DataFrame(
        {
            "rank": rows["rank"].to_numpy(),
            "correlation": corr,
            "exact": rows["start_us"].to_numpy(),
            "bandwidth": rows["bandwidth_gbps"].to_numpy(),
        }
    )
    exact = work["start_exact"] if "start_exact" in work else work["start"]
    mine = pd.DataFrame(
        {
            "rank": work["rank"].to_numpy(),
            "correlation": work["correlation"].to_numpy(),
            "exact": exact.to_numpy(),
            "start": work["start"].to_numpy(),
            # HTA: a zero duration counts as 1 us
            "end": np.where(
                work["end"].to_numpy() > work["start"].to_numpy(),
                work["end"].to_numpy(),
                work["start"].to_numpy() + 1.0,
            ),
            "name": [hta_name(str(n)) for n in work["name"].astype(str)],
        }
    ).merge(own, on=["rank", "correlation", "exact"], how="left")
    out = []
    for (rank, name), group in mine.groupby(["rank", "name"], sort=True):
        bw = group["bandwidth"].to_numpy()
        bw = bw[bw > 0]
        order = np.argsort(group["start"].to_numpy(), kind="stable")
        start, end = group["start"].to_numpy()[order], group["end"].to_numpy()[order]
        together = bool(len(start) > 1 and (start[1:] <= np.maximum.accumulate(end)[:-1]).any())
        out.append(
            {
                "rank": None if rank < 0 else int(rank),
                "name": name,
                "count": int(bw.size),
                "mean": float(bw.mean()) if bw.size else np.nan,
                "min": float(bw.min()) if bw.size else np.nan,
                "max": float(bw.max()) if bw.size else np.nan,
                "concurrent": together,
            }
        )
    return pd.DataFrame(out, columns=HTA_COLUMNS)
