"""Chrome Trace Event JSON (PyTorch profiler / kineto, TensorFlow, JAX, Perfetto) into event tables.

Accepts ``.json`` and ``.json.gz`` (gzip is detected by content), either a
top-level array of events or an object with ``traceEvents``. The file is
*streamed* with ijson (yajl2_c backend) and columns are built in numpy batches,
so memory follows the number of events, not the size of the JSON text.

- ``X`` (complete) events and ``i``/``I`` instants (duration 0) go to ``events``;
- ``B``/``E`` pairs are matched per thread (see :mod:`popprof.trace.begin_end`);
  an ``E`` with nothing open is counted (``warnings.unmatched_end``) and an
  unclosed ``B`` is kept with a missing duration (``warnings.unmatched_begin``);
- ``C`` counters go to ``counters`` (one row per series in ``args``);
- ``M`` metadata (``process_name``, ``thread_name``) names rows of ``threads``;
- other phases (flows, async, objects) are counted in ``chrome.skipped_phases``.

Nesting (``parent_id``, ``depth``) is derived per thread from time containment,
and ``device_category`` from :mod:`popprof.trace.device`. Options:
``with_args`` keeps each event's ``args`` as JSON text; ``device_map``
overrides the device-activity mapping. See ``docs/traces.md``.
"""

from __future__ import annotations

import contextlib
import gc
import io
import itertools
import json
import operator
import os
import re
import threading
import zlib
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from gzip import BadGzipFile
from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..io.files import guard_json, open_binary, open_json
from ..io.heap import gc_paused, release_free_memory
from ..io.progress import counted, reading
from ..io.sources import source_metadata
from ..io.workers import quiet_worker
from ..model.errors import InputError
from ..model.profile import Profile
from ..trace import frame
from ..trace.begin_end import match_begin_end
from . import chrome_trace_arrow

FORMAT = "chrome_trace"
#: Files at least this large (uncompressed) are parsed in parts on several processes.
PARALLEL_MIN_BYTES = 8 << 20
#: the smallest piece a split file is cut into (where the two processes meet)
MIN_PIECE_BYTES = 2 << 20
#: seconds to wait for the lock on the pieces (it is held for microseconds)
CLAIM_TIMEOUT = 30.0
_TRACE_OBJECT = re.compile(rb'"traceEvents"\s*:\s*\[')
_ARRAY_START = re.compile(rb"^\s*\[\s*(\{|\]|$)")
_PH_KEY = re.compile(rb'"ph"\s*:\s*"')


def _strip(head: bytes) -> bytes:
    return head.removeprefix(b"\xef\xbb\xbf").lstrip()


def sniff(path: Path, head: bytes) -> bool:
    """A JSON array of trace events, or an object with ``traceEvents``."""
    if path.is_dir():
        return False
    head = _strip(head)
    if head.startswith(b"{"):
        return _TRACE_OBJECT.search(head) is not None
    if head.startswith(b"["):
        if head.rstrip() in (b"[", b"[]"):
            return path.name.endswith((".json", ".json.gz"))
        return _ARRAY_START.match(head) is not None and _PH_KEY.search(head) is not None
    return False


class _Interner:
    """Strings to dense codes as events stream by (``None`` -> -1; non-strings as their JSON text)."""

    def __init__(self) -> None:
        self.index: dict[object, int] = {None: -1}
        self.labels: list[str] = []
        self._by_label: dict[str, int] = {}

    def add(self, value: object) -> int:
        """Code of a value not yet in ``index`` (the hot loop tries ``index.get`` first)."""
        label = value if isinstance(value, str) else json.dumps(value)
        code = self._by_label.get(label)
        if code is None:
            code = self._by_label[label] = len(self.labels)
            self.labels.append(label)
        with contextlib.suppress(TypeError):  # unhashable (a list or dict as a name)
            self.index[value] = code
        return code

    def code(self, value: object) -> int:
        code = self.index.get(value) if _hashable(value) else None
        return self.add(value) if code is None else code


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


#: A pid / tid written as a JSON string of a plain decimal integer (no sign but '-', no leading zeros).
_DECIMAL_ID = re.compile(r"-?(?:0|[1-9][0-9]*)")


class _Ids:
    """pid / tid values to int64; non-integer ids (strings) get stable synthetic ids and keep their text."""

    FIRST_SYNTHETIC = frame.SYNTHETIC_ID_BASE

    def __init__(self) -> None:
        self.synthetic: dict[object, int] = {}

    def one(self, value: object) -> int:
        if value is None:
            return 0
        if (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and float(value).is_integer()
            and -(1 << 63) <= value < (1 << 63)
        ):
            return int(value)
        if isinstance(value, str) and _DECIMAL_ID.fullmatch(value) and -(1 << 63) <= int(value) < (1 << 63):
            return int(value)  # old Kineto writes the same thread as "25738" on X events and 25738 elsewhere
        key = str(value)
        if key not in self.synthetic:
            self.synthetic[key] = self.FIRST_SYNTHETIC + len(self.synthetic)
        return self.synthetic[key]


class _Columns:
    """Column chunks (numpy) of one kind of event, in file order."""

    KEYS = (
        ("name", np.int32),
        ("cat", np.int32),
        ("pid", np.int64),
        ("tid", np.int64),
        ("ts", np.float64),
        ("dur", np.float64),
        ("stream", np.float64),
        ("corr", np.float64),
        ("device", np.float64),
        ("instant", np.int8),
    )

    def __init__(self) -> None:
        self.chunks: list[dict[str, np.ndarray]] = []
        self.args: list[str | None] = []

    def add(self, chunk: dict[str, np.ndarray]) -> None:
        if len(chunk["ts"]):
            self.chunks.append(chunk)

    def arrays(self) -> dict[str, np.ndarray]:
        if not self.chunks:
            return {key: np.zeros(0, dtype=dtype) for key, dtype in self.KEYS}
        out = {
            key: np.concatenate([c.pop(key) for c in self.chunks]) for key, _ in self.KEYS
        }  # frees as it goes
        self.chunks.clear()
        return out


def _json_text(value: object) -> str:
    try:
        import orjson

        return orjson.dumps(value).decode()
    except (ImportError, TypeError):
        return json.dumps(value, default=str)


def _event_prefix(path: Path) -> str:
    with open_binary(path) as handle:
        head = _strip(handle.read(4096))
    return "item" if head.startswith(b"[") else "traceEvents.item"


@dataclass
class _Parsed:
    """What one pass over (a part of) the event stream collected."""

    names: list[str]
    cats: list[str]
    x: dict[str, np.ndarray]
    x_args: list[str | None]
    b: dict[str, np.ndarray]
    b_kind: np.ndarray
    b_args: list[str | None]
    counters: list[tuple]
    process_names: dict[int, str]
    thread_names: dict[tuple[int, int], str]
    synthetic: dict[object, int]
    skipped: Counter
    warnings: Counter
    parsed: int
    error: str
    flows: dict[str, np.ndarray] = field(default_factory=dict)
    top: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    flow_labels: list[str] = field(default_factory=list)  # phase / name / cat / bp codes of ``flows``


_FIELD_GETTERS = tuple(operator.itemgetter(k) for k in ("name", "cat", "pid", "tid", "ts", "dur"))
_GET_PH = operator.methodcaller("get", "ph")
_GET_ARGS = operator.methodcaller("get", "args")
#: args fields kept as columns: Kineto's GPU stream, launch correlation id and device
_ARG_FIELDS = (("stream", "stream"), ("corr", "correlation"), ("device", "device"))
_EMPTY: dict = {}
_NAN = float("nan")
_GET_ARGS_OR_EMPTY = operator.methodcaller("get", "args", _EMPTY)
_FLOW_PHASES = frozenset(("s", "t", "f"))
_FLOW_GETTERS = tuple(
    operator.methodcaller("get", k) for k in ("pid", "tid", "ts", "id", "name", "cat", "bp")
)
#: flow columns: pid, tid, ts, id (text) and codes into ``flow_labels`` for phase, name, cat, bp
_FLOW_KEYS = (
    ("pid", np.int64),
    ("tid", np.int64),
    ("ts", np.float64),
    ("id", object),
    ("phase", np.int32),
    ("name", np.int32),
    ("cat", np.int32),
    ("bp", np.int32),
)
CHUNK_EVENTS = 1 << 14
#: the columns of an Arrow block that flows and complete events read
_FLOW_COLUMNS = ("ph", "name", "cat", "pid", "tid", "ts", "id", "bind_id", "bp")
_COMPLETE_COLUMNS = ("name", "cat", "pid", "tid", "ts", "dur", "args")


class _StreamState:
    """Everything one pass collects; complete events are converted a chunk at a time, in C."""

    def __init__(self, with_args: bool) -> None:
        self.with_args = with_args
        self.names, self.cats, self.ids = _Interner(), _Interner(), _Ids()
        self.complete = _Columns()  # X, and instants with dur 0
        self.be = _Columns()  # B and E, in file order
        self.be_kind: list[bool] = []
        self.counters: list[tuple] = []
        self.process_names: dict[int, str] = {}
        self.thread_names: dict[tuple[int, int], str] = {}
        self.skipped: Counter = Counter()
        self.warnings: Counter = Counter()
        self.flow_chunks: list[dict[str, np.ndarray]] = []
        self.flow_labels = _Interner()
        self.top: dict = {}
        self.meta: dict[tuple, object] = {}  # other M events: (kind, pid[, tid]) -> value

    # -- complete events, the bulk of every trace: whole chunks through C-level maps ------------
    def take(self, batch: list) -> None:
        try:
            phases = list(map(_GET_PH, batch))
        except AttributeError:  # an item that is not an object
            return self._mixed(batch, None)
        if phases.count("X") != len(batch):
            # split at C speed: flows (kineto writes one or two per launch) as columns, the rest one by one
            is_x = list(map(operator.eq, phases, itertools.repeat("X")))
            try:
                is_flow = list(map(_FLOW_PHASES.__contains__, phases))
            except TypeError:  # an unhashable "ph" (a list, an object): everything one by one
                return self._mixed(batch, None)
            if any(is_flow):
                self._flows(
                    list(itertools.compress(batch, is_flow)), list(itertools.compress(phases, is_flow))
                )
            rest = list(map(operator.not_, map(operator.or_, is_x, is_flow)))
            if any(rest):
                self._mixed(list(itertools.compress(batch, rest)), list(itertools.compress(phases, rest)))
            if not any(is_x):
                return None
            batch = list(itertools.compress(batch, is_x))
        try:
            columns = [list(map(getter, batch)) for getter in _FIELD_GETTERS]
        except (KeyError, TypeError):
            return self._mixed(batch, None)
        self.complete.add(self._columns(columns, self.complete, batch, complete=True))
        return None

    def take_table(self, table: pa.Table) -> None:
        """A block of plain X and flow events parsed by Arrow (:mod:`.chrome_trace_arrow`), column by column."""
        col = chrome_trace_arrow.column
        is_x = pc.equal(col(table, "ph"), "X")  # no nulls: parse_block took X / s / t / f events only
        if is_x.true_count < len(is_x):  # each side filters only the columns it reads
            flows = table.select(_FLOW_COLUMNS).filter(pc.invert(is_x))
            flow_id = col(flows, "id")
            if flow_id.null_count:  # Perfetto's flow v2 binds with "bind_id"
                flow_id = pc.coalesce(flow_id, col(flows, "bind_id"))
            labels = self.flow_labels
            self._add_flows(
                {
                    "pid": _arrow_ints(col(flows, "pid")),
                    "tid": _arrow_ints(col(flows, "tid")),
                    "ts": _arrow_floats(col(flows, "ts")),
                    "id": flow_id.cast(pa.string()),
                    "phase": self._arrow_codes(col(flows, "ph"), labels),
                    "name": self._arrow_codes(col(flows, "name"), labels),
                    "cat": self._arrow_codes(col(flows, "cat"), labels),
                    "bp": self._arrow_codes(col(flows, "bp"), labels),
                }
            )
            table = table.select(_COMPLETE_COLUMNS).filter(is_x)
        if not table.num_rows:
            return
        chunk = {
            "name": self._arrow_codes(col(table, "name"), self.names),
            "cat": self._arrow_codes(col(table, "cat"), self.cats),
            "pid": _arrow_ints(col(table, "pid")),
            "tid": _arrow_ints(col(table, "tid")),
            "ts": _arrow_floats(col(table, "ts")),
            "dur": _arrow_floats(col(table, "dur")),
            "stream": _arrow_floats(col(table, "args.stream")),
            "corr": _arrow_floats(col(table, "args.correlation")),
            "device": _arrow_floats(col(table, "args.device")),
            "instant": np.zeros(table.num_rows, dtype=np.int8),
        }
        self.complete.add(self._checked(chunk, complete=True))

    def _arrow_codes(self, values: pa.Array, interner: _Interner) -> np.ndarray:
        """Interned codes of a string column (-1 for null), labels added in order of first appearance."""
        encoded = values.dictionary_encode()
        lut = np.append(self._codes(encoded.dictionary.to_pylist(), interner), np.int32(-1))
        indices = encoded.indices
        return lut[(indices.fill_null(-1) if indices.null_count else indices).to_numpy()]

    def _codes(self, values: tuple, interner: _Interner) -> np.ndarray:
        get = interner.index.get
        try:
            codes = list(map(get, values))
        except TypeError:  # an unhashable value (a list or object as a name): one by one
            return np.asarray([interner.code(v) for v in values], dtype=np.int32)
        if None in codes:
            new = itertools.compress(values, map(operator.is_, codes, itertools.repeat(None)))
            for value in dict.fromkeys(new):
                interner.add(value)  # in order of first appearance: deterministic codes
            codes = list(map(get, values))
        return np.asarray(codes, dtype=np.int32)

    def _ids(self, values: tuple) -> np.ndarray:
        """pid / tid values as int64, exactly as :meth:`_Ids.one` maps each (whole chunks at C speed).

        Only a chunk of plain integers takes the fast path: casting with ``dtype=int64``
        would also turn ``"7"`` into 7 and truncate 1.5 to 1, so the same id would get a
        different value depending on what else its chunk held (and on metadata events,
        which go through :meth:`_Ids.one`).
        """
        try:
            out = np.asarray(values)
            if out.ndim == 1 and out.dtype.kind == "i":
                return out.astype(np.int64, copy=False)
        except (TypeError, ValueError, OverflowError):
            pass
        return np.fromiter(map(self.ids.one, values), dtype=np.int64, count=len(values))

    def _floats(self, values: tuple) -> np.ndarray:
        try:
            out = np.asarray(values, dtype=np.float64)
            if out.ndim == 1:
                return finite_times(out)
        except (TypeError, ValueError, OverflowError):
            pass
        numbers = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce")
        return finite_times(numbers.to_numpy(np.float64, na_value=np.nan))

    def _flows(self, events: list[dict], phases: list[str]) -> None:
        """Flow events (``s`` / ``t`` / ``f``) of a batch as column chunks, at C speed."""
        pid, tid, ts, flow_id, name, cat, bp = ([*map(get, events)] for get in _FLOW_GETTERS)
        if None in flow_id:  # Perfetto's flow v2 binds with "bind_id"
            flow_id = [
                v if v is not None else ev.get("bind_id") for v, ev in zip(flow_id, events, strict=True)
            ]
        labels = self.flow_labels
        self._add_flows(
            {
                "pid": self._ids(pid),
                "tid": self._ids(tid),
                "ts": self._floats(ts),
                "id": _id_texts(flow_id),
                "phase": self._codes(phases, labels),
                "name": self._codes(name, labels),
                "cat": self._codes(cat, labels),
                "bp": self._codes(bp, labels),
            }
        )

    def _add_flows(self, chunk: dict) -> None:
        keep = ~np.isnan(chunk["ts"])
        if not keep.all():
            self.warnings["missing_fields"] += int((~keep).sum())
            chunk = {k: v.filter(pa.array(keep)) if k == "id" else v[keep] for k, v in chunk.items()}
        self.flow_chunks.append(chunk)

    def flow_arrays(self) -> dict[str, np.ndarray]:
        if not self.flow_chunks:
            return {}
        out = _concat_flows(self.flow_chunks)
        self.flow_chunks.clear()
        return out

    def _columns(
        self, columns: list, store: _Columns, events: list, complete: bool, instant: list[int] | None = None
    ) -> dict[str, np.ndarray]:
        name, cat, pid, tid, ts, dur = columns
        chunk = {
            "name": self._codes(name, self.names),
            "cat": self._codes(cat, self.cats),
            "pid": self._ids(pid),
            "tid": self._ids(tid),
            "ts": self._floats(ts),
            "dur": self._floats(dur),
        }
        chunk.update(_arg_fields(events))
        # 0 = not an instant; else 1 + index of the instant's scope in INSTANT_SCOPES (kept for the timeline)
        chunk["instant"] = (
            np.zeros(len(chunk["ts"]), dtype=np.int8)
            if instant is None
            else np.asarray(instant, dtype=np.int8)
        )
        return self._checked(chunk, complete, store, events)

    def _checked(
        self,
        chunk: dict[str, np.ndarray],
        complete: bool,
        store: _Columns | None = None,
        events: list | None = None,
    ) -> dict[str, np.ndarray]:
        """Drop rows without a timestamp and zero missing or negative durations (counted as warnings)."""
        keep = ~np.isnan(chunk["ts"])
        if not keep.all():
            self.warnings["missing_fields"] += int((~keep).sum())
        if complete:
            d = chunk["dur"]
            missing = np.isnan(d) & keep
            negative = (d < 0) & keep
            if missing.any():
                self.warnings["missing_fields"] += int(missing.sum())
            if negative.any():
                self.warnings["negative_duration"] += int(negative.sum())
            chunk["dur"] = np.where(missing | negative, 0.0, d)
        if self.with_args and store is not None and events is not None:
            texts = [None if a is None else _json_text(a) for a in map(_GET_ARGS, events)]
            store.args.extend(t for t, k in zip(texts, keep.tolist(), strict=True) if k)
        if not keep.all():
            chunk = {k: v[keep] for k, v in chunk.items()}
        return chunk

    # -- everything else, event by event -----------------------------------------------------
    def _mixed(self, batch: list, phases: list | None) -> None:
        x_rows, x_events, b_rows, b_events, x_instant = [], [], [], [], []
        flow_events, flow_phases = [], []
        for i, ev in enumerate(batch):
            if type(ev) is not dict:
                self.warnings["malformed_events"] += 1
                continue
            ph = phases[i] if phases is not None else ev.get("ph")
            if ph == "X" or ph == "i" or ph == "I" or ph == "R":
                dur = ev.get("dur") if ph == "X" else 0.0
                if dur is None:
                    dur = float("nan")  # counted as missing in _columns
                x_rows.append(
                    (ev.get("name"), ev.get("cat"), ev.get("pid"), ev.get("tid"), ev.get("ts"), dur)
                )
                x_events.append(ev)
                x_instant.append(0 if ph == "X" else _instant_code(ph, ev.get("s")))
            elif ph == "B" or ph == "E":
                b_rows.append(
                    (ev.get("name"), ev.get("cat"), ev.get("pid"), ev.get("tid"), ev.get("ts"), 0.0)
                )
                b_events.append(ev)
            elif ph == "C":
                _counter(ev, self.counters, self.ids, self.warnings)
            elif ph == "M":
                _metadata_event(ev, self.ids, self.process_names, self.thread_names, self.meta)
            elif ph == "s" or ph == "t" or ph == "f":
                flow_events.append(ev)
                flow_phases.append(ph)
            else:
                self.skipped[str(ph)] += 1
        if flow_events:
            self._flows(flow_events, flow_phases)
        if x_rows:
            self.complete.add(
                self._columns(
                    list(zip(*x_rows, strict=True)), self.complete, x_events, complete=True, instant=x_instant
                )
            )
        if b_rows:
            chunk = self._columns(list(zip(*b_rows, strict=True)), self.be, b_events, complete=False)
            has_ts = ~np.isnan(self._floats(tuple(r[4] for r in b_rows)))  # the rows _columns kept
            self.be_kind.extend(
                ev.get("ph") == "B" for ev, ok in zip(b_events, has_ts.tolist(), strict=True) if ok
            )
            self.be.add(chunk)


class _Unframeable(Exception):
    """The block framer cannot cut this stream safely: parse it with ijson instead."""


_KEY = rb'"(?:ph|name|cat|pid|tid|ts|dur|args|id|s|bp|cname|tts|sf|stack)"'
#: the end of one event and the start of the next: ``}`` ``,`` ``{"key":``
_BOUNDARY = re.compile(rb"\}\s*,\s*(?=\{\s*" + _KEY + rb"\s*:)")
_ARRAY_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
#: Arrow blocks between two returns of free heap pages to the system: rare, because the pages a block
#: freed are reused by the next one, while pages given back are faulted in again (every 8 blocks cost
#: about 3 % of a 600,000-event load in page faults; every 64 raises its peak from ~198 to ~211 MiB)
TRIM_EVERY = 64
#: blocks in a row that the Arrow fast path could not take before the rest of a stream goes to orjson only
FAST_MISSES = 3
FAST_BLOCK_BYTES = 1 << 20  # larger Arrow blocks are no faster here and leave more in the heap
BLOCK_BYTES = 1 << 20  # ~8,000 kineto events: bounds the Python objects alive at once (and stays in cache)
MAX_PENDING_BYTES = 256 << 20


def _array_start(handle, prefix: str, top: dict | None = None) -> bytes:
    """Read up to the opening ``[`` of the event array; return the bytes after it.

    The top-level members before the array (``distributedInfo``, ``deviceProperties``, ...) go to ``top``.
    """
    buf = handle.read(BLOCK_BYTES)
    head = _strip(buf)
    if prefix == "item":
        if not head.startswith(b"["):
            raise _Unframeable
        return head[1:]
    match = _ARRAY_KEY.search(buf)
    if match is None:
        raise _Unframeable
    try:  # proves the key is a member of the top-level object (not inside a string or a nested value)
        head = orjson.loads(buf[: match.end()] + b"]}")
    except orjson.JSONDecodeError:
        head = None
    if not isinstance(head, dict):
        raise _Unframeable
    if top is not None:
        top.update((k, v) for k, v in head.items() if k != "traceEvents")
    return buf[match.end() :]


def _tail_members(rest: bytes) -> dict:
    """The top-level members after the event array (``rest`` starts after its closing ``]``)."""
    try:
        tail = orjson.loads(b'{"_":[]' + rest)
    except orjson.JSONDecodeError:
        return {}
    return {k: v for k, v in tail.items() if k != "_"} if isinstance(tail, dict) else {}


def _arrow_ints(values: pa.Array) -> np.ndarray:
    """pid / tid from Arrow: a missing one is 0, as :meth:`_Ids.one` maps ``None``."""
    return values.fill_null(0).to_numpy()


def _arrow_floats(values: pa.Array) -> np.ndarray:
    """Numbers as float64, NaN where missing (or not a time: see :func:`finite_times`)."""
    return finite_times(values.cast(pa.float64()).to_numpy(zero_copy_only=False))


#: Largest time (microseconds) a trace may hold: year 5000 since the epoch. Beyond it (``1.7e308``,
#: ``"Infinity"``) a value is no time at all and is read as missing, as a value that is not a number.
MAX_TIME_US = 1e17


def finite_times(values: np.ndarray) -> np.ndarray:
    """``values`` with non-finite and absurd entries (beyond :data:`MAX_TIME_US`) as NaN (missing)."""
    bad = ~(np.abs(values) <= MAX_TIME_US)
    if bad.any():
        values = values.copy() if not values.flags.writeable else values
        values[bad & ~np.isnan(values)] = np.nan
    return values


def _id_texts(values: list) -> pa.Array:
    """Flow ids as text (ids are integers in kineto's traces: converted in C, no Python strings)."""
    try:
        numbers = np.asarray(values)
        if numbers.ndim == 1 and numbers.dtype.kind in "iu":
            return pa.array(numbers).cast(pa.string())
    except (TypeError, ValueError, OverflowError):
        pass
    return pa.array(
        [None if v is None else v if type(v) is str else str(v) for v in values], type=pa.string()
    )


def _concat_flows(chunks: list[dict]) -> dict:
    """One flow column set from chunks in order (ids: one arrow string array)."""
    return {
        key: pa.concat_arrays([c.pop(key) for c in chunks])
        if key == "id"
        else np.concatenate([c.pop(key) for c in chunks])
        for key, _ in _FLOW_KEYS
    }  # frees as it goes


def _text(value: object) -> str | None:
    return None if value is None else value if isinstance(value, str) else json.dumps(value)


def _optional_numbers(values: list) -> np.ndarray:
    """Numbers as float64, NaN where missing or not an integer-like number (``"0x0"`` streams: NaN, as in HTA)."""
    try:
        out = np.array(values, dtype=np.float64)
        if out.ndim == 1:
            return out
    except (TypeError, ValueError):
        pass
    return np.fromiter(map(_one_number, values), dtype=np.float64, count=len(values))


def _one_number(value: object) -> float:
    if isinstance(value, bool) or value is None:
        return float("nan")
    try:
        return float(int(value))  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        return float("nan")


def _arg_fields(events: list) -> dict[str, np.ndarray]:
    """``args.stream`` / ``args.correlation`` / ``args.device`` of each event (NaN when absent), at C speed."""
    args = list(map(_GET_ARGS_OR_EMPTY, events))
    n = len(args)
    out = {}
    for key, arg in _ARG_FIELDS:
        try:  # the common case: every args an object, every value a number or absent
            out[key] = np.fromiter(
                map(dict.get, args, itertools.repeat(arg), itertools.repeat(_NAN)), np.float64, n
            )
            continue
        except TypeError:  # an args that is not an object (null, a list): treat as empty
            args = [a if type(a) is dict else _EMPTY for a in args]
        except ValueError:  # a value that is not a number ("0x0" streams of HIP runtime calls)
            pass
        out[key] = _optional_numbers(list(map(dict.get, args, itertools.repeat(arg))))
    return out


def _array_ends(buf: bytes, prefix: str) -> Iterator[int]:
    """Candidate indices (last first) of the ``]`` closing the event array in the stream's last bytes.

    A candidate qualifies when what follows it closes the document; the caller
    also checks that what precedes it parses as the array's last events (a later
    array, such as ``deviceProperties``, qualifies on the first test only).
    """
    window = min(len(buf), 1 << 20)
    for match in reversed(list(re.finditer(rb"\]", buf[len(buf) - window :]))):
        index = len(buf) - window + match.start()
        rest = buf[index + 1 :]
        if prefix == "item":
            if not rest.strip():
                yield index
            continue
        try:
            orjson.loads(b'{"_":[]' + rest)
        except orjson.JSONDecodeError:
            continue
        yield index


def _blocks(handle, prefix: str, top: dict | None = None, fast: bool = False) -> Iterator[list | pa.Table]:
    """Events of the stream as lists of dicts, one ~1 MB block at a time, parsed by orjson.

    With ``fast``, blocks of plain X and flow events come as Arrow tables instead
    (:func:`.chrome_trace_arrow.parse_block`); a block that is not plain goes to orjson
    ~1 MB at a time, and after a few such blocks in a row the rest of the stream too.

    A block is cut after the last ``}, {"key":`` in it and parsed as ``[`` block
    ``]``. A cut that falls inside nested ``args`` makes that parse fail, and the
    previous candidate is tried, so every yielded list holds exactly the events of
    the block. Anything else unusual raises :class:`_Unframeable`.
    """
    pending = _array_start(handle, prefix, top)
    eof = False
    misses = 0
    stuck = False  # no event could be cut from what is pending: read more before trying again

    def plain(text: bytes) -> tuple[pa.Table | None, int]:
        nonlocal misses, fast
        table, covered = chrome_trace_arrow.parse_block(text)
        misses = 0 if table is not None else misses + 1
        fast = misses < FAST_MISSES
        return table, covered

    def small_cuts() -> list:
        """Boundaries near BLOCK_BYTES: orjson takes a large pending block ~1 MB at a time."""
        return list(_BOUNDARY.finditer(pending, max(0, BLOCK_BYTES - (1 << 16)), BLOCK_BYTES + (1 << 16)))

    while True:
        size = FAST_BLOCK_BYTES if fast else BLOCK_BYTES
        if not eof and (len(pending) < size or stuck):
            stuck = False
            more = handle.read(size)
            if more:
                pending += more
                if len(pending) < size:
                    continue
            else:
                eof = True
        if eof:
            ends = list(itertools.islice(_array_ends(pending, prefix), 8))
            if fast and ends:
                table, covered = plain(pending[: ends[0]])
                if table is not None:
                    yield table
                if covered == ends[0]:
                    if top is not None and prefix != "item":
                        top.update(_tail_members(pending[ends[0] + 1 :]))
                    return
                if covered:
                    pending = pending[covered:]
                    continue
            if len(pending) > 2 * BLOCK_BYTES:
                found = _parse_to_cut(pending, small_cuts())
                if found is None:
                    raise _Unframeable
                yield found[0]
                pending = pending[found[1] :]
                continue
            for end in ends:
                try:
                    events = orjson.loads(b"[" + pending[:end] + b"]")
                except orjson.JSONDecodeError:
                    continue
                if top is not None and prefix != "item":
                    top.update(_tail_members(pending[end + 1 :]))
                break
            else:
                if prefix != "item":
                    raise _Unframeable
                try:  # the array format may omit its closing bracket
                    events = orjson.loads(b"[" + pending.rstrip().rstrip(b",") + b"]")
                except orjson.JSONDecodeError:
                    raise _Unframeable from None
            if events:
                yield events
            return
        tail_from = max(0, len(pending) - (1 << 16))
        cuts = [m for m in _BOUNDARY.finditer(pending, tail_from)] or list(_BOUNDARY.finditer(pending))
        if fast and cuts:
            table, covered = plain(pending[: cuts[-1].start() + 1])
            if table is not None:
                yield table
            if covered == cuts[-1].start() + 1:
                pending = pending[cuts[-1].end() :]
                continue
            if covered:  # the events from the first one that is not plain: ~1 MB through orjson below
                pending = pending[covered:]
                cuts = small_cuts() or list(_BOUNDARY.finditer(pending))
        if len(pending) > 2 * BLOCK_BYTES:
            cuts = small_cuts() or cuts
        found = _parse_to_cut(pending, cuts)
        if found is not None:
            yield found[0]
            pending = pending[found[1] :]
        elif len(pending) > MAX_PENDING_BYTES:
            raise _Unframeable
        else:
            stuck = True


def _parse_to_cut(pending: bytes, cuts: list) -> tuple[list, int] | None:
    """The events of ``pending`` up to the latest of its last eight boundaries that parses (a boundary
    inside nested ``args`` does not), and where the rest starts; ``None`` when none does."""
    for cut in reversed(cuts[-8:]):
        try:
            return orjson.loads(b"[" + pending[: cut.start() + 1] + b"]"), cut.end()
        except orjson.JSONDecodeError:
            continue
    return None


def _parse_stream(handle, prefix: str, with_args: bool, engine: str = "orjson") -> _Parsed:
    """Parse a stream of events: orjson blocks by default, ijson (the fallback) on request."""
    state = _StreamState(with_args)
    error = ""
    parsed = 0
    if engine == "orjson":
        tables = 0
        for events in _blocks(handle, prefix, state.top, fast=not with_args):
            if isinstance(events, pa.Table):
                parsed += events.num_rows
                state.take_table(events)
                del events
                tables += 1
                if tables % TRIM_EVERY == 0:
                    release_free_memory()  # the blocks' text copies: free pages back (it costs ~10 ms a call)
                continue
            for lo in range(0, len(events), CHUNK_EVENTS):
                part = events[lo : lo + CHUNK_EVENTS]
                parsed += len(part)
                state.take(part)
    else:
        import ijson

        batch: list = []
        append = batch.append
        try:
            for ev in ijson.items(handle, prefix, use_float=True, buf_size=1 << 16):
                append(ev)
                if len(batch) >= CHUNK_EVENTS:
                    parsed += len(batch)
                    state.take(batch)
                    batch.clear()
        except (ijson.JSONError, EOFError, zlib.error, BadGzipFile, UnicodeDecodeError) as exc:
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".strip()
        if batch:
            parsed += len(batch)
            state.take(batch)
    return _Parsed(
        state.names.labels,
        state.cats.labels,
        state.complete.arrays(),
        state.complete.args,
        state.be.arrays(),
        np.asarray(state.be_kind, dtype=bool),
        state.be.args,
        state.counters,
        state.process_names,
        state.thread_names,
        state.ids.synthetic,
        state.skipped,
        state.warnings,
        parsed,
        error,
        state.flow_arrays(),
        state.top,
        state.meta,
        state.flow_labels.labels,
    )


def _parse_file(path: Path, prefix: str, with_args: bool) -> _Parsed:
    """One pass over the whole file: orjson blocks, or ijson when the blocks cannot be framed."""
    try:
        with open_json(path) as handle:
            return _parse_stream(handle, prefix, with_args, "orjson")
    except (_Unframeable, EOFError, zlib.error, BadGzipFile, UnicodeDecodeError):
        with open_json(path) as handle:
            return _parse_stream(handle, prefix, with_args, "ijson")


class _RangeReader(io.RawIOBase):
    """Bytes ``head`` + file[lo:hi] + ``tail``, as a readable stream (one part of a split file)."""

    def __init__(self, path: Path, lo: int, hi: int, head: bytes, tail: bytes) -> None:
        super().__init__()
        self._file = counted(open(path, "rb"))  # noqa: SIM115 - closed in close(); reads count toward progress
        self._file.seek(lo)
        self._left = hi - lo
        self._head = head
        self._tail = tail

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = len(buffer)
        if self._head:
            data, self._head = self._head[:n], self._head[n:]
        elif self._left > 0:
            data = self._file.read(min(n, self._left))
            self._left -= len(data)
            if not data:
                self._left = 0
        else:
            data, self._tail = self._tail[:n], self._tail[n:]
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._file.close()
        super().close()


def _piece_fractions(size: int) -> list[float]:
    """Where to cut a file of ``size`` bytes into pieces for two processes that take them from both ends.

    Each piece covers half of what is left between its end of the file and the middle, down to
    pieces of about :data:`MIN_PIECE_BYTES`: the two processes start on large pieces and meet
    in the middle on small ones, so the one that finishes first waits at most for a small piece.
    """
    cuts = []
    at = 0.0
    while (0.5 - at) / 2 * size >= MIN_PIECE_BYTES:
        at += (0.5 - at) / 2
        cuts.append(at)
    return cuts + [0.5] + [1 - c for c in reversed(cuts)]


def _split_plan(
    path: Path, prefix: str, fractions: list[float]
) -> list[tuple[int, int, bytes, bytes]] | None:
    """Byte ranges that split the event array between events near ``fractions`` of the file, or ``None``.

    A boundary is a ``}, {"key":`` between two events. Each part is parsed as a
    complete JSON document (part 0 closed with ``]`` / ``]}``, later parts
    wrapped in ``[`` ... ``]``); a part that does not parse cleanly makes the
    caller fall back to one serial pass, so a boundary found inside a string
    can never produce wrong events. A boundary that does not advance past the
    previous one (an event longer than the gap) is skipped.
    """
    size = path.stat().st_size
    with open(path, "rb") as handle:
        if handle.read(2) == b"\x1f\x8b":
            return None
        # where the array ends: the last "]" whose remainder closes the document (if a later array also
        # qualifies, the last part fails to parse and the caller falls back to one pass)
        handle.seek(size - min(size, 1 << 20))
        array_end = next((size - min(size, 1 << 20) + i for i in _array_ends(handle.read(), prefix)), None)
        if array_end is None:
            return None
        cuts: list[int] = []
        for fraction in fractions:
            at = int(size * fraction)
            handle.seek(at)
            window = handle.read(1 << 16)  # events are short: a boundary is almost always this near
            match = _BOUNDARY.search(window)
            if match is None:
                window += handle.read((1 << 20) - len(window))
                match = _BOUNDARY.search(window)
            if match is None:
                return None
            comma = at + window.index(b",", match.start())
            if comma > (cuts[-1] if cuts else 0) and comma < array_end:
                cuts.append(comma)
    if not cuts:
        return None
    closing = b"]" if prefix == "item" else b"]}"
    plan = [(0, cuts[0], b"", closing)]
    plan += [(lo + 1, hi, b"[", b"]") for lo, hi in zip(cuts, cuts[1:] + [array_end], strict=True)]
    return plan


def _parse_part(job: tuple[str, int, int, bytes, bytes, str, bool]) -> _Parsed:
    path, lo, hi, head, tail, prefix, with_args = job
    part_prefix = prefix if lo == 0 else "item"
    try:
        with _RangeReader(Path(path), lo, hi, head, tail) as raw:
            return _parse_stream(guard_json(raw, Path(path)), part_prefix, with_args, "orjson")
    except (_Unframeable, UnicodeDecodeError):
        with _RangeReader(Path(path), lo, hi, head, tail) as raw:
            return _parse_stream(guard_json(raw, Path(path)), part_prefix, with_args, "ijson")


class _Claims:
    """Which pieces of a split file are still untaken: the reading process takes them from the front,
    the worker from the back, so both stay busy until they meet (whichever core runs slower)."""

    def __init__(self, context, pieces: int) -> None:
        self._lock = context.Lock()
        self._bounds = context.RawArray("q", [0, pieces])  # the untaken pieces: [front, back)

    def take(self, from_back: bool) -> int | None:
        """The next piece from one end, or ``None`` when all are taken (or the lock is never freed: a
        process that died holding it; the pieces it left are then missing and a serial pass runs)."""
        if not self._lock.acquire(timeout=CLAIM_TIMEOUT):
            return None
        try:
            front, back = self._bounds
            if front >= back:
                return None
            if from_back:
                self._bounds[1] = back - 1
                return back - 1
            self._bounds[0] = front + 1
            return front
        finally:
            self._lock.release()


#: in a worker process: the claims it shares with the reading process (set by the pool's initializer)
_worker_claims: _Claims | None = None


def _set_worker_claims(claims: _Claims) -> None:
    global _worker_claims
    _worker_claims = claims


def _parse_front(jobs: list[tuple], claims: _Claims) -> list[tuple[int, _Parsed]]:
    """This process's share: pieces from the front of the file until none is left, ``(piece, parsed)``."""
    done = []
    while (piece := claims.take(from_back=False)) is not None:
        done.append((piece, _parse_part(jobs[piece])))
        if done[-1][1].error:
            break  # the serial fallback will read the file again: no point in going on
    return done


def _parse_back(jobs: list[tuple]) -> tuple[int, _Parsed] | None:
    """One job of the worker: the last untaken piece, or ``None`` when all are taken. Each piece goes
    back to the reading process as soon as it is parsed (the transfer overlaps the next piece)."""
    if _worker_claims is None:  # not started by _start_parallel: leave every piece to the reading process
        return None
    piece = _worker_claims.take(from_back=True)
    return None if piece is None else (piece, _parse_part(jobs[piece]))


class _Workers:
    """A forked worker process parsing pieces of a split file from its end, then describing the file.

    This process parses pieces from the start itself (:meth:`parts`). The description
    of the source (its SHA-256) is the pool's last job: it runs on the worker once
    its pieces are done, while this process merges the parts and builds the tables,
    instead of competing with the parse for the two cores.
    """

    def __init__(self, pool, jobs: list[tuple], claims: _Claims, futures: list, path: Path) -> None:
        self._pool, self._jobs, self._claims, self._futures = pool, jobs, claims, futures
        self._source = pool.submit(_describe_source, path)
        self._path = path

    def parts(self) -> list[_Parsed] | None:
        """Collect the pieces in file order; ``None`` (serial fallback) when any failed or did not parse cleanly."""
        import concurrent.futures

        try:
            done = dict(_parse_front(self._jobs, self._claims))
            release_free_memory()  # what this process's pieces left in the heap, before the worker's come in
            done.update(result for future in self._futures if (result := future.result()) is not None)
        except (OSError, RuntimeError, concurrent.futures.process.BrokenProcessPool):
            return None
        if sorted(done) != list(range(len(self._jobs))) or any(part.error for part in done.values()):
            return None  # a piece did not parse cleanly: let one serial pass find and report the problem
        return [done[piece] for piece in range(len(self._jobs))]

    def source(self) -> dict[str, str]:
        """The source description from the worker (computed here if the worker could not)."""
        try:
            return self._source.result()
        except Exception:  # noqa: BLE001 - whatever went wrong over there, the description is made here
            return source_metadata(FORMAT, [self._path])
        finally:
            self.close()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def _describe_source(path: Path) -> dict[str, str]:
    """The worker's last job: it first hands back the heap its part used (it stays alive while the
    reading process builds the tables, and their peaks would add up), then hashes the file."""
    release_free_memory()
    return source_metadata(FORMAT, [path])


def _start_parallel(path: Path, prefix: str, with_args: bool) -> _Workers | None:
    """Start parsing a large plain file in pieces on two processes; ``None`` when not worth it.

    The worker is forked (no re-import of the caller's main module, which spawn would need) before any
    other thread of ours starts, with the objects alive at the fork frozen out of the garbage
    collector, so its collections do not copy the pages it shares with this process.
    """
    if (os.cpu_count() or 1) < 2 or path.stat().st_size < PARALLEL_MIN_BYTES:
        return None
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods():
        return None
    plan = _split_plan(path, prefix, _piece_fractions(path.stat().st_size))
    if plan is None:
        return None
    import concurrent.futures

    jobs = [(str(path), lo, hi, head, tail, prefix, with_args) for lo, hi, head, tail in plan]
    context = multiprocessing.get_context("fork")
    claims = _Claims(context, len(jobs))
    gc.freeze()
    pool = None
    try:
        pool = concurrent.futures.ProcessPoolExecutor(
            1, mp_context=context, initializer=quiet_worker, initargs=(_set_worker_claims, claims)
        )
        # one job per piece: the worker takes pieces until none is left, the jobs after that return at once
        futures = [pool.submit(_parse_back, jobs) for _ in jobs]  # the first forks the worker
        return _Workers(pool, jobs, claims, futures, path)
    except (OSError, RuntimeError):
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        return None
    finally:
        gc.unfreeze()


def _unify_synthetic_ids(parts: list[_Parsed]) -> dict[object, int]:
    """Number string pids / tids (kineto's ``"Spans"``, ...) the same way in every part, whatever the path.

    Each part numbered its string ids from ``_Ids.FIRST_SYNTHETIC`` in the order it met them (which
    depends on where the part starts and how its events were batched); the final numbering follows
    the sorted labels, so one serial pass and a split parse give the same ids. Each part's columns,
    thread keys, counters and flows are rewritten to it.
    """
    first = _Ids.FIRST_SYNTHETIC
    labels = sorted({label for part in parts for label in part.synthetic}, key=str)
    merged: dict[object, int] = {label: first + i for i, label in enumerate(labels)}
    for part in parts:
        if not part.synthetic:
            continue
        lut = np.empty(len(part.synthetic), dtype=np.int64)
        for label, local in part.synthetic.items():
            lut[local - first] = merged[label]
        if np.array_equal(lut, np.arange(first, first + len(lut))):
            continue  # already the merged numbering

        def one(value: int, lut: np.ndarray = lut) -> int:
            return int(lut[value - first]) if first <= value < first + len(lut) else value

        for cols in (part.x, part.b, part.flows):
            for key in ("pid", "tid") if cols else ():
                values = cols[key]
                local = (values >= first) & (values < first + len(lut))
                if local.any():
                    values = values.copy()
                    values[local] = lut[values[local] - first]
                    cols[key] = values
        part.process_names = {one(pid): name for pid, name in part.process_names.items()}
        part.thread_names = {(one(pid), one(tid)): name for (pid, tid), name in part.thread_names.items()}
        part.meta = {(key[0], *map(one, key[1:])): value for key, value in part.meta.items()}
        part.counters = [(one(row[0]), *row[1:]) for row in part.counters]
        part.synthetic = {label: merged[label] for label in part.synthetic}
    return merged


def _merge(parts: list[_Parsed]) -> _Parsed:
    """Combine the parts of a split parse (in file order) into one."""
    if len(parts) == 1:
        return parts[0]
    names, cats = _Interner(), _Interner()
    xs, bs, fs = [], [], []
    flow_labels = _Interner()
    out = _Parsed([], [], {}, [], {}, np.zeros(0, bool), [], [], {}, {}, {}, Counter(), Counter(), 0, "")
    for part in parts:
        name_lut = np.array([names.code(x) for x in part.names] + [-1], dtype=np.int32)
        cat_lut = np.array([cats.code(x) for x in part.cats] + [-1], dtype=np.int32)
        for cols, store in ((part.x, xs), (part.b, bs)):
            cols["name"] = name_lut[cols["name"]]
            cols["cat"] = cat_lut[cols["cat"]]
            store.append(cols)
        out.x_args.extend(part.x_args)
        out.b_args.extend(part.b_args)
        out.counters.extend(part.counters)
        out.process_names.update(part.process_names)
        out.thread_names.update(part.thread_names)
        out.skipped.update(part.skipped)
        out.warnings.update(part.warnings)
        out.parsed += part.parsed
        if part.flows:
            flow_lut = np.array([flow_labels.code(x) for x in part.flow_labels] + [-1], dtype=np.int32)
            for key in ("phase", "name", "cat", "bp"):
                part.flows[key] = flow_lut[part.flows[key]]
            fs.append(part.flows)
        out.synthetic.update(part.synthetic)
        out.top.update(part.top)
        out.meta.update(part.meta)
    out.names, out.cats = names.labels, cats.labels
    out.flow_labels = flow_labels.labels
    out.flows = _concat_flows(fs) if fs else {}
    out.x, out.b = {}, {}
    for key in list(xs[0]):  # one column at a time, freeing the parts' copies as we go
        out.x[key] = np.concatenate([c.pop(key) for c in xs])
        out.b[key] = np.concatenate([c.pop(key) for c in bs])
    out.b_kind = np.concatenate([p.b_kind for p in parts])
    return out


def read(
    path: Path,
    *,
    with_args: bool = False,
    device_map: Mapping[str, str | None] | str | None = None,
    parallel: bool = True,
    **_options: object,
) -> Profile:
    """Read a Chrome trace into a Profile with events, threads, counters, target and metadata.

    Large uncompressed files are parsed in pieces on two processes, this one and a
    forked worker (``parallel=False`` turns that off); anything unusual falls back
    to one serial pass, which is what reports errors.
    """
    # bytes read against the file size, worker processes included; no cyclic garbage collection (the
    # parse makes no cycles, and a collection walks every dict orjson made: the fork inherits that too)
    with reading(path), gc_paused():
        return _read(path, with_args=with_args, device_map=device_map, parallel=parallel)


def _read(path: Path, *, with_args: bool, device_map, parallel: bool) -> Profile:
    prefix = _event_prefix(path)
    workers = _start_parallel(path, prefix, with_args) if parallel else None
    try:
        return _read_parts(path, prefix, workers, with_args=with_args, device_map=device_map)
    finally:
        if workers is not None:
            workers.close()


def _read_parts(path: Path, prefix: str, workers: _Workers | None, *, with_args: bool, device_map) -> Profile:
    source = (
        workers.source if workers is not None else _Background(lambda: source_metadata(FORMAT, [path])).result
    )
    parts = workers.parts() if workers is not None else None
    if parts is None:
        parts = [_parse_file(path, prefix, with_args)]
    elif prefix != "item":  # the last part stops at the array's end: read the members after it here
        parts[-1].top.update(_file_tail_members(path, prefix))
    n_parts = len(parts)
    release_free_memory()  # what the parse and the transfer from the workers left in the heap
    _unify_synthetic_ids(parts)
    parsed = _merge(parts)
    del parts
    release_free_memory()
    x, b, kinds = parsed.x, parsed.b, parsed.b_kind
    warnings, truncated = parsed.warnings, parsed.error
    args: list | None = parsed.x_args if with_args else None
    if len(kinds):
        pairing = match_begin_end(kinds, b["pid"], b["tid"], b["ts"])
        warnings["unmatched_end"] += len(pairing.unmatched_end)
        warnings["unmatched_begin"] += len(pairing.unmatched_begin)
        warnings["out_of_order_timestamps"] += pairing.out_of_order
        starts = np.concatenate((pairing.begin, pairing.unmatched_begin))
        durs = np.concatenate(
            (b["ts"][pairing.end] - b["ts"][pairing.begin], np.full(len(pairing.unmatched_begin), np.nan))
        )
        for key in ("name", "cat", "pid", "tid", "ts", "stream", "corr", "device", "instant"):
            x[key] = np.concatenate((x[key], b[key][starts]))
        x["dur"] = np.concatenate((x["dur"], durs))
        if args is not None:
            be_args = parsed.b_args
            for s, e in zip(pairing.begin.tolist(), pairing.end.tolist(), strict=True):
                be_args[s] = _merge_args(be_args[s], be_args[e])
            args = args + [be_args[i] for i in starts.tolist()]

    if truncated and parsed.parsed == 0:
        raise InputError(
            path,
            f"not valid JSON ({truncated})",
            "expected Chrome trace JSON; the file may be truncated or not JSON at all",
        )
    if len(x["ts"]) == 0 and not parsed.counters:
        raise InputError(
            path,
            "holds no usable trace events (no X/B/E/i/C events with timestamps)",
            "check that this is a Chrome trace (chrome://tracing / PyTorch profiler JSON)",
        )

    parsed.x = parsed.b = {}  # build_events gets the only references, so it can free them as it sorts
    rank = trace_rank(parsed.top, path)
    stream = x.pop("stream")
    if RANGE_PROFILER_CHANNEL in parsed.cats:  # CUPTI range-profiler kernels: GPU work, on their tid's track
        ranged = (x["cat"] == parsed.cats.index(RANGE_PROFILER_CHANNEL)) & np.isnan(stream)
        stream = np.where(ranged, x["tid"].astype(np.float64), stream)
    extra = kineto_columns(stream, x.pop("corr"), x.pop("device"), x["pid"])
    extra["instant_scope"] = (x.pop("instant").astype(np.int32) - 1, list(INSTANT_SCOPES))
    events, counts = (
        frame.build_events(  # it gets the only references: each input column is freed once reordered
            pid=x.pop("pid"),
            tid=x.pop("tid"),
            start=x.pop("ts"),
            dur=x.pop("dur"),
            name_codes=x.pop("name"),
            names=parsed.names,
            channel_codes=x.pop("cat"),
            channels=parsed.cats,
            source_format=FORMAT,
            device_map=device_map,
            args=args,
            extra=extra,
        )
    )
    release_free_memory()  # the input-order columns build_events sorted and dropped
    events["rank"] = frame.constant_int(len(events), rank)
    bookkeeping_pids = [parsed.synthetic[k] for k in BOOKKEEPING_PROCESSES if k in parsed.synthetic]
    events["bookkeeping"] = bookkeeping_mask(events, bookkeeping_pids)
    warnings["partial_overlap"] += counts.get("partial_overlap", 0)
    process_names = dict(parsed.process_names)
    for label, synthetic in parsed.synthetic.items():
        process_names.setdefault(synthetic, str(label))
    threads = frame.build_threads(
        events,
        process_names,
        parsed.thread_names,
        extra=[(key[1], key[2] if len(key) > 2 else 0) for key in parsed.meta],
    )
    threads = _thread_metadata(threads, parsed.meta)
    labels = {synthetic: str(label) for label, synthetic in parsed.synthetic.items()}
    if labels:  # a thread id written as text ("stream 7") names its thread
        text = threads["tid"].map(labels)
        threads["thread_name"] = threads["thread_name"].where(threads["thread_name"].notna(), text)
    threads["rank"] = frame.constant_int(len(threads), rank)
    counter_frame = _counter_frame(parsed.counters)
    flows = _flow_frame(parsed.flows, parsed.flow_labels, rank)

    metadata: dict[str, object] = dict(source())
    metadata["chrome.events_read"] = parsed.parsed
    metadata["chrome.parse_parts"] = n_parts
    metadata["chrome.flows"] = 0 if flows is None else len(flows)
    for key, value in parsed.top.items():
        metadata[f"chrome.top.{key}"] = _json_text(value)
    if rank is not None:
        metadata["trace.rank"] = rank
    if parsed.skipped:
        metadata["chrome.skipped_phases"] = json.dumps(dict(sorted(parsed.skipped.items())))
    for key, count in sorted(warnings.items()):
        if count:
            metadata[f"warnings.{key}"] = count
    if truncated:
        metadata["warnings.truncated"] = truncated
    target = {"source_format": [FORMAT]}
    return Profile(
        path.name.removesuffix(".gz").removesuffix(".json") or path.stem,
        {"target": target, "events": events, "threads": threads, "counters": counter_frame, "flows": flows},
        source=str(path),
        metadata=metadata,
    )


#: Kineto's bookkeeping pseudo-processes (string pids): never attributed, never a busiest thread or top event.
BOOKKEEPING_PROCESSES = ("Spans", "Traces")
#: The channel of kernels recorded by CUPTI's range profiler (``cuda_profiler_range``): one X event per kernel
#: on the GPU's pid, without ``args.stream``; read as device work with the event's tid as its stream.
RANGE_PROFILER_CHANNEL = "cuda_profiler_range"
_BOOKKEEPING_NAME = re.compile(
    r"^(?:PyTorch Profiler \(\d+\)|Iteration Start: PyTorch Profiler|Record Window End)$"
)
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


def trace_rank(top: Mapping, path: Path) -> int | None:
    """The rank of a trace: ``distributedInfo.rank``, else ``rank-N`` / ``rank_N`` in the file name."""
    info = top.get("distributedInfo")
    if isinstance(info, dict):
        value = info.get("rank")
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.isdigit():
            return int(value)
    match = _RANK_IN_NAME.search(path.name)
    return int(match.group(1)) if match else None


def kineto_columns(stream: np.ndarray, corr: np.ndarray, device: np.ndarray, pid: np.ndarray) -> dict:
    """``stream``, ``correlation`` (Int64) and ``device`` (``gpu:N``) from Kineto's args, in input order.

    An event on a stream is device work; its device is ``args.device``, else its pid (Kineto puts each
    GPU in its own pid).
    """
    on_stream = ~np.isnan(stream)
    dev = np.where(np.isnan(device), pid.astype(np.float64), device)
    codes = np.full(len(stream), -1, dtype=np.int32)
    labels: list[str] = []
    if on_stream.any():
        uniq, inverse = np.unique(dev[on_stream], return_inverse=True)
        labels = [f"gpu:{int(v)}" for v in uniq]
        codes[on_stream] = inverse.astype(np.int32)
    return {"stream": _int64(stream), "correlation": _int64(corr), "device": (codes, labels)}


def _int64(values: np.ndarray) -> pd.arrays.IntegerArray:
    missing = np.isnan(values)
    return pd.arrays.IntegerArray(np.where(missing, 0, values).astype(np.int64), missing)


def bookkeeping_mask(events: pd.DataFrame, pids: list[int]) -> np.ndarray:
    """Kineto's own bookkeeping: channel ``Trace``, the ``PyTorch Profiler (N)`` span and its global instants
    (``Iteration Start: PyTorch Profiler``, ``Record Window End``), the Spans/Traces pseudo-processes, and the
    profiler's own overhead (channel ``overhead``, e.g. CUPTI's ``Activity Buffer Request``, on pid -1)."""
    names = events["name"].array
    hit = np.array([bool(_BOOKKEEPING_NAME.match(str(c))) for c in names.categories] + [False], dtype=bool)
    mask = hit[np.asarray(names.codes)]
    mask |= events["channel"].isin(("Trace", "overhead")).to_numpy(dtype=bool, na_value=False)
    mask |= events["pid"].to_numpy() == -1
    if pids:
        mask |= np.isin(events["pid"].to_numpy(), pids)
    return mask


def _flow_frame(flows: dict[str, np.ndarray], labels: list[str], rank: int | None) -> pd.DataFrame | None:
    if not flows or not len(flows["ts"]):
        return None

    def categorical(codes: np.ndarray) -> pd.Categorical:
        """Codes into ``labels`` as a categorical of the labels used, sorted (-1: missing)."""
        present = np.bincount(codes[codes >= 0], minlength=len(labels)) > 0  # O(n): no sort of the codes
        used = sorted(np.flatnonzero(present).tolist(), key=labels.__getitem__)
        lut = np.full(len(labels) + 1, -1, dtype=np.int32)
        lut[used] = np.arange(len(used), dtype=np.int32)
        return pd.Categorical.from_codes(lut[codes], categories=[labels[i] for i in used])

    return pd.DataFrame(
        {
            "rank": frame.constant_int(len(flows["ts"]), rank),
            "pid": flows["pid"],
            "tid": flows["tid"],
            "ts_us": flows["ts"],
            "phase": categorical(flows["phase"]),
            "id": pd.array(flows["id"], dtype="str"),
            "name": categorical(flows["name"]),
            "channel": categorical(flows["cat"]),
            "binding": categorical(flows["bp"]),
        }
    )


def _file_tail_members(path: Path, prefix: str) -> dict:
    """Top-level members after the event array of a plain (not gzip) file, from its last megabyte."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        handle.seek(size - min(size, 1 << 20))
        buf = handle.read()
    for end in _array_ends(buf, prefix):
        return _tail_members(buf[end + 1 :])
    return {}


def _merge_args(begin: str | None, end: str | None) -> str | None:
    if not end or end == "{}":
        return begin
    if not begin or begin == "{}":
        return end
    try:
        merged = json.loads(begin)
        merged.update(json.loads(end))
        return _json_text(merged)
    except (ValueError, AttributeError):
        return begin


def _counter(ev: dict, rows: list[tuple], ids: _Ids, warnings: Counter) -> None:
    ts = ev.get("ts")
    args = ev.get("args")
    try:
        ts = float(ts)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        ts = float("nan")
    if ts != ts or not isinstance(args, dict):
        warnings["missing_fields"] += 1
        return
    pid = ids.one(ev.get("pid"))
    name = str(ev.get("name", ""))
    if ev.get("id") is not None:
        name = f"{name} {ev['id']}"
    for series, value in args.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            rows.append((pid, name, str(series), ts, float(value)))


def _counter_frame(rows: list[tuple]) -> pd.DataFrame | None:
    if not rows:
        return None
    pid, name, series, ts, value = zip(*rows, strict=True)
    return pd.DataFrame(
        {
            "pid": np.asarray(pid, dtype=np.int64),
            "name": pd.Categorical(name),
            "series": pd.Categorical(series),
            "ts_us": np.asarray(ts, dtype=np.float64),
            "value": np.asarray(value, dtype=np.float64),
        }
    )


#: Scopes of instant events (``"s"``: thread, process, global), as ``events.instant_scope``.
INSTANT_SCOPES = ("t", "p", "g")
_INSTANT_CODE = {scope: i + 1 for i, scope in enumerate(INSTANT_SCOPES)}
#: Metadata events kept as ``threads`` columns (besides the names): kind -> (args key, process-wide?).
THREAD_METADATA = {
    "process_labels": ("labels", True),
    "process_sort_index": ("sort_index", True),
    "thread_sort_index": ("sort_index", False),
}


def _instant_code(ph: str, scope: object) -> int:
    """``events.instant_scope`` code of an instant event (thread scope unless it says otherwise)."""
    return _INSTANT_CODE.get(scope, 1) if isinstance(scope, str) else 1


def _metadata_event(
    ev: dict, ids: _Ids, process_names: dict, thread_names: dict, meta: dict | None = None
) -> None:
    args = ev.get("args")
    kind = ev.get("name")
    if meta is not None and kind in THREAD_METADATA and isinstance(args, dict):
        key, process_wide = THREAD_METADATA[kind]
        value = args.get(key)
        if value is not None:
            pid = ids.one(ev.get("pid"))
            meta[(kind, pid) if process_wide else (kind, pid, ids.one(ev.get("tid")))] = value
        return
    label = args.get("name") if isinstance(args, dict) else None
    if label is None:
        return
    pid = ids.one(ev.get("pid"))
    if kind == "process_name":
        process_names[pid] = str(label)
    elif kind == "thread_name":
        thread_names[(pid, ids.one(ev.get("tid")))] = str(label)


def _thread_metadata(threads: pd.DataFrame, meta: dict) -> pd.DataFrame:
    """``process_labels``, ``process_sort_index``, ``thread_sort_index`` columns from the metadata events."""
    if not meta:
        return threads
    threads = threads.copy()
    pids, tids = threads["pid"].tolist(), threads["tid"].tolist()
    for kind, (_, process_wide) in THREAD_METADATA.items():
        values = [
            meta.get((kind, p) if process_wide else (kind, p, t)) for p, t in zip(pids, tids, strict=True)
        ]
        if kind == "process_labels":
            threads[kind] = pd.array([None if v is None else str(v) for v in values], dtype="str")
        else:
            threads[kind] = pd.array(
                [v if isinstance(v, int) and not isinstance(v, bool) else None for v in values], dtype="Int64"
            )
    return threads


class _Background:
    """Run a function on a thread (hashing releases the GIL, so it overlaps with parsing)."""

    def __init__(self, func) -> None:
        self._result: object = None
        self._error: BaseException | None = None

        def run() -> None:
            try:
                self._result = func()
            except BaseException as exc:  # re-raised in result()
                self._error = exc

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def result(self):
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._result
