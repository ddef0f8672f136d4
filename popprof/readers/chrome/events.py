"""One pass's collector: events of the stream, a batch (or an Arrow block) at a time, into column chunks.

Complete events, the bulk of every trace, are converted whole batches at a time through C-level maps;
flows become column chunks; everything else (B/E, counters, metadata, instants) goes event by event.
"""

from __future__ import annotations

import itertools
import operator
from collections import Counter

import numpy as np
import pyarrow as pa

from . import arrow, kernels
from .columns import (
    Columns,
    Ids,
    Interner,
    arg_fields,
    arrow_floats,
    arrow_ints,
    concat_flows,
    finite_times,
    id_texts,
    json_text,
)

_FIELD_GETTERS = tuple(operator.itemgetter(k) for k in ("name", "cat", "pid", "tid", "ts", "dur"))
_GET_PH = operator.methodcaller("get", "ph")
_GET_ARGS = operator.methodcaller("get", "args")


_FLOW_PHASES = frozenset(("s", "t", "f"))
_FLOW_GETTERS = tuple(
    operator.methodcaller("get", k) for k in ("pid", "tid", "ts", "id", "name", "cat", "bp")
)
#: flow columns: pid, tid, ts, id (text) and codes into ``flow_labels`` for phase, name, cat, bp


#: Longest event a trace may hold (2^40 us, 12.7 days; no profiler records that long): a longer one, as a
#: negative one, is counted as 0 and warned (a 285-year kernel made the time account lose microseconds to
#: float rounding, and its busy time hid every other figure).
MAX_DURATION_US = float(1 << 40)
#: the columns of an Arrow block that flows and complete events read
_FLOW_COLUMNS = ("ph", "name", "cat", "pid", "tid", "ts", "id", "bind_id", "bp")
_COMPLETE_COLUMNS = ("name", "cat", "pid", "tid", "ts", "dur", "args")


class StreamState:
    """Everything one pass collects; complete events are converted a chunk at a time, in C."""

    def __init__(self, with_args: bool, flows: bool = True) -> None:
        self.with_args = with_args
        #: keep the flows' columns; without, flows are only counted (``flow_count``) and read again on use
        self.keep_flows = flows
        self.flow_count = 0  # flows kept (or counted): every flow with a timestamp
        self.names, self.cats, self.ids = Interner(), Interner(), Ids()
        self.complete = Columns()  # X, and instants with dur 0
        self.be = Columns()  # B and E, in file order
        self.be_kind: list[bool] = []
        self.counters: list[tuple] = []
        self.process_names: dict[int, str] = {}
        self.thread_names: dict[tuple[int, int], str] = {}
        self.skipped: Counter = Counter()
        self.warnings: Counter = Counter()
        self.flow_chunks: list[dict[str, np.ndarray]] = []
        self.flow_labels = Interner()
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
        """A block of plain X and flow events parsed by Arrow (:mod:`.arrow`), column by column."""
        col = arrow.column
        call = kernels.call
        is_x = call("equal", col(table, "ph"), arrow.complete_phase())  # no nulls: X / s / t / f events only
        if is_x.true_count < len(is_x) and not self.keep_flows:  # count them, as _add_flows would keep them
            flow_rows = ~is_x.to_numpy(zero_copy_only=False)
            missing = int(np.count_nonzero(np.isnan(arrow_floats(col(table, "ts"))[flow_rows])))
            self._count_flows(int(np.count_nonzero(flow_rows)) - missing, missing)
            table = kernels.keep(table.select(_COMPLETE_COLUMNS), is_x)
        elif is_x.true_count < len(is_x):  # each side filters only the columns it reads
            flows = kernels.keep(table.select(_FLOW_COLUMNS), call("invert", is_x))
            flow_id = col(flows, "id")
            if flow_id.null_count:  # Perfetto's flow v2 binds with "bind_id"
                flow_id = call("coalesce", flow_id, col(flows, "bind_id"))
            labels = self.flow_labels
            self._add_flows(
                {
                    "pid": arrow_ints(col(flows, "pid")),
                    "tid": arrow_ints(col(flows, "tid")),
                    "ts": arrow_floats(col(flows, "ts")),
                    "id": kernels.cast(flow_id, pa.string()),
                    "phase": self._arrow_codes(col(flows, "ph"), labels),
                    "name": self._arrow_codes(col(flows, "name"), labels),
                    "cat": self._arrow_codes(col(flows, "cat"), labels),
                    "bp": self._arrow_codes(col(flows, "bp"), labels),
                }
            )
            table = kernels.keep(table.select(_COMPLETE_COLUMNS), is_x)
        if not table.num_rows:
            return
        chunk = {
            "name": self._arrow_codes(col(table, "name"), self.names),
            "cat": self._arrow_codes(col(table, "cat"), self.cats),
            "pid": arrow_ints(col(table, "pid")),
            "tid": arrow_ints(col(table, "tid")),
            "ts": arrow_floats(col(table, "ts")),
            "dur": arrow_floats(col(table, "dur")),
            "stream": arrow_floats(col(table, "args.stream")),
            "corr": arrow_floats(col(table, "args.correlation")),
            "device": arrow_floats(col(table, "args.device")),
            "instant": np.zeros(table.num_rows, dtype=np.int8),
        }
        self.complete.add(self._checked(chunk, complete=True))

    def _arrow_codes(self, values: pa.Array, interner: Interner) -> np.ndarray:
        """Interned codes of a string column (-1 for null), labels added in order of first appearance."""
        encoded = kernels.call("dictionary_encode", values)
        lut = np.append(self._codes(encoded.dictionary.to_pylist(), interner), np.int32(-1))
        indices = kernels.fill_null(encoded.indices, -1)
        return lut[indices.to_numpy()]

    def _codes(self, values: tuple, interner: Interner) -> np.ndarray:
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
        """pid / tid values as int64, exactly as :meth:`Ids.one` maps each (whole chunks at C speed).

        Only a chunk of plain integers takes the fast path: casting with ``dtype=int64``
        would also turn ``"7"`` into 7 and truncate 1.5 to 1, so the same id would get a
        different value depending on what else its chunk held (and on metadata events,
        which go through :meth:`Ids.one`).
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
        import pandas as pd  # only for mixed values (numbers written as text): the parse imports no pandas

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
                "id": id_texts(flow_id),
                "phase": self._codes(phases, labels),
                "name": self._codes(name, labels),
                "cat": self._codes(cat, labels),
                "bp": self._codes(bp, labels),
            }
        )

    def _add_flows(self, chunk: dict) -> None:
        keep = ~np.isnan(chunk["ts"])
        kept = int(np.count_nonzero(keep))
        self._count_flows(kept, len(keep) - kept)
        if not self.keep_flows:
            return
        if kept < len(keep):
            mask = pa.array(keep, type=pa.bool_())
            chunk = {k: kernels.keep(v, mask) if k == "id" else v[keep] for k, v in chunk.items()}
        self.flow_chunks.append(chunk)

    def _count_flows(self, kept: int, missing: int) -> None:
        """Flows with a timestamp (kept) and without one (dropped, counted as missing fields)."""
        self.flow_count += kept
        if missing:
            self.warnings["missing_fields"] += missing

    def flow_arrays(self) -> dict[str, np.ndarray]:
        if not self.flow_chunks:
            return {}
        out = concat_flows(self.flow_chunks)
        self.flow_chunks.clear()
        return out

    def _columns(
        self, columns: list, store: Columns, events: list, complete: bool, instant: list[int] | None = None
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
        chunk.update(arg_fields(events))
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
        store: Columns | None = None,
        events: list | None = None,
    ) -> dict[str, np.ndarray]:
        """Drop rows without a finite timestamp and zero missing, negative or huge durations (beyond
        :data:`MAX_DURATION_US`), counted as warnings."""
        keep = np.isfinite(chunk["ts"])
        if not keep.all():
            self.warnings["missing_fields"] += int((~keep).sum())
        if complete:
            d = chunk["dur"]
            missing = np.isnan(d) & keep
            negative = (d < 0) & keep
            huge = (d > MAX_DURATION_US) & keep  # an infinite one too: its end would be no time at all
            if missing.any():
                self.warnings["missing_fields"] += int(missing.sum())
            if negative.any():
                self.warnings["negative_duration"] += int(negative.sum())
            if huge.any():
                self.warnings["huge_duration"] += int(huge.sum())
            chunk["dur"] = np.where(missing | negative | huge, 0.0, d)
        if self.with_args and store is not None and events is not None:
            texts = [None if a is None else json_text(a) for a in map(_GET_ARGS, events)]
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


def _counter(ev: dict, rows: list[tuple], ids: Ids, warnings: Counter) -> None:
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
    ev: dict, ids: Ids, process_names: dict, thread_names: dict, meta: dict | None = None
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
