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

import json
import re
import threading
import zlib
from collections import Counter
from gzip import BadGzipFile
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError
from ..profile import Profile
from ..sources import source_metadata
from ..trace import frame
from ..trace.begin_end import match_begin_end
from . import open_binary

FORMAT = "chrome_trace"
BATCH = 1 << 17
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
    """Strings to dense codes, fed per batch through pandas.factorize (no per-event Python)."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.labels: list[str] = []

    def codes(self, values: list) -> np.ndarray:
        local, uniques = pd.factorize(np.asarray(values, dtype=object), use_na_sentinel=True)
        lut = np.empty(len(uniques) + 1, dtype=np.int32)
        lut[-1] = -1
        for i, value in enumerate(uniques):
            lut[i] = self.code(value if isinstance(value, str) else json.dumps(value))
        return lut[local]

    def code(self, label: str) -> int:
        code = self.index.get(label)
        if code is None:
            code = self.index[label] = len(self.labels)
            self.labels.append(label)
        return code


class _Ids:
    """pid / tid values to int64; non-integer ids (strings) get stable synthetic ids and keep their text."""

    FIRST_SYNTHETIC = 1 << 40

    def __init__(self) -> None:
        self.synthetic: dict[object, int] = {}

    def convert(self, values: list) -> np.ndarray:
        try:
            return np.asarray(values, dtype=np.int64)
        except (TypeError, ValueError, OverflowError):
            return np.fromiter((self.one(v) for v in values), dtype=np.int64, count=len(values))

    def one(self, value: object) -> int:
        if value is None:
            return 0
        if isinstance(value, int | float) and not isinstance(value, bool) and float(value).is_integer():
            return int(value)
        key = str(value)
        if key not in self.synthetic:
            self.synthetic[key] = self.FIRST_SYNTHETIC + len(self.synthetic)
        return self.synthetic[key]


class _Columns:
    """Column buffers of one kind of event, flushed to numpy every ``BATCH`` rows."""

    def __init__(self, with_args: bool) -> None:
        self.with_args = with_args
        self.name: list = []
        self.cat: list = []
        self.pid: list = []
        self.tid: list = []
        self.ts: list = []
        self.dur: list = []
        self.args: list = []
        self.chunks: list[dict[str, np.ndarray]] = []
        self.args_text: list[str | None] = []

    def flush(self, names: _Interner, cats: _Interner, ids: _Ids) -> None:
        if not self.ts:
            return
        chunk = {
            "name": names.codes(self.name),
            "cat": cats.codes(self.cat),
            "pid": ids.convert(self.pid),
            "tid": ids.convert(self.tid),
            "ts": _floats(self.ts),
            "dur": _floats(self.dur),
        }
        self.chunks.append(chunk)
        if self.with_args:
            self.args_text.extend(None if a is None else _json_text(a) for a in self.args)
        for buf in (self.name, self.cat, self.pid, self.tid, self.ts, self.dur, self.args):
            buf.clear()

    def concat(self) -> dict[str, np.ndarray]:
        keys = ("name", "cat", "pid", "tid", "ts", "dur")
        if not self.chunks:
            dtypes = {"name": np.int32, "cat": np.int32, "pid": np.int64, "tid": np.int64,
                      "ts": np.float64, "dur": np.float64}
            return {k: np.zeros(0, dtype=dtypes[k]) for k in keys}
        out = {k: np.concatenate([c[k] for c in self.chunks]) for k in keys}
        self.chunks.clear()
        return out


def _floats(values: list) -> np.ndarray:
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(np.float64)


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


def read(path: Path, *, with_args: bool = False, device_map=None, **_options: object) -> Profile:
    """Read a Chrome trace into a Profile with events, threads, counters, target and metadata."""
    import ijson

    hasher = _Background(lambda: source_metadata(FORMAT, [path]))
    prefix = _event_prefix(path)
    names, cats, ids = _Interner(), _Interner(), _Ids()
    complete = _Columns(with_args)      # X, and instants with dur 0
    be = _Columns(with_args)            # B and E, in file order
    be_kind: list[bool] = []
    counters: list[tuple] = []
    process_names: dict[int, str] = {}
    thread_names: dict[tuple[int, int], str] = {}
    skipped: Counter = Counter()
    warnings: Counter = Counter()
    truncated = ""
    parsed = 0

    c_name, c_cat, c_pid, c_tid = complete.name.append, complete.cat.append, complete.pid.append, complete.tid.append
    c_ts, c_dur, c_args = complete.ts.append, complete.dur.append, complete.args.append
    try:
        with open_binary(path) as handle:
            for ev in ijson.items(handle, prefix, use_float=True, buf_size=1 << 18):
                parsed += 1
                if type(ev) is not dict:
                    warnings["malformed_events"] += 1
                    continue
                ph = ev.get("ph")
                if ph == "X":
                    ts = ev.get("ts")
                    if ts is None:
                        warnings["missing_fields"] += 1
                        continue
                    dur = ev.get("dur")
                    if dur is None:
                        warnings["missing_fields"] += 1
                        dur = 0.0
                    elif dur < 0:
                        warnings["negative_duration"] += 1
                        dur = 0.0
                    c_name(ev.get("name"))
                    c_cat(ev.get("cat"))
                    c_pid(ev.get("pid"))
                    c_tid(ev.get("tid"))
                    c_ts(ts)
                    c_dur(dur)
                    if with_args:
                        c_args(ev.get("args"))
                    if len(complete.ts) >= BATCH:
                        complete.flush(names, cats, ids)
                elif ph == "B" or ph == "E":
                    ts = ev.get("ts")
                    if ts is None:
                        warnings["missing_fields"] += 1
                        continue
                    be_kind.append(ph == "B")
                    be.name.append(ev.get("name"))
                    be.cat.append(ev.get("cat"))
                    be.pid.append(ev.get("pid"))
                    be.tid.append(ev.get("tid"))
                    be.ts.append(ts)
                    be.dur.append(0.0)
                    if with_args:
                        be.args.append(ev.get("args"))
                    if len(be.ts) >= BATCH:
                        be.flush(names, cats, ids)
                elif ph == "i" or ph == "I" or ph == "R":
                    ts = ev.get("ts")
                    if ts is None:
                        warnings["missing_fields"] += 1
                        continue
                    c_name(ev.get("name"))
                    c_cat(ev.get("cat"))
                    c_pid(ev.get("pid"))
                    c_tid(ev.get("tid"))
                    c_ts(ts)
                    c_dur(0.0)
                    if with_args:
                        c_args(ev.get("args"))
                    if len(complete.ts) >= BATCH:
                        complete.flush(names, cats, ids)
                elif ph == "C":
                    _counter(ev, counters, ids, warnings)
                elif ph == "M":
                    _metadata_event(ev, ids, process_names, thread_names)
                else:
                    skipped[str(ph)] += 1
    except (ijson.JSONError, EOFError, zlib.error, BadGzipFile, UnicodeDecodeError) as exc:
        truncated = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".strip()
    complete.flush(names, cats, ids)
    be.flush(names, cats, ids)

    x = complete.concat()
    args: list | None = complete.args_text if with_args else None
    b = be.concat()
    kinds = np.asarray(be_kind, dtype=bool)
    if len(kinds):
        pairing = match_begin_end(kinds, b["pid"], b["tid"], b["ts"])
        warnings["unmatched_end"] += len(pairing.unmatched_end)
        warnings["unmatched_begin"] += len(pairing.unmatched_begin)
        warnings["out_of_order_timestamps"] += pairing.out_of_order
        starts = np.concatenate((pairing.begin, pairing.unmatched_begin))
        durs = np.concatenate((b["ts"][pairing.end] - b["ts"][pairing.begin],
                               np.full(len(pairing.unmatched_begin), np.nan)))
        for key in ("name", "cat", "pid", "tid", "ts"):
            x[key] = np.concatenate((x[key], b[key][starts]))
        x["dur"] = np.concatenate((x["dur"], durs))
        if args is not None:
            be_args = be.args_text
            for s, e in zip(pairing.begin.tolist(), pairing.end.tolist(), strict=True):
                be_args[s] = _merge_args(be_args[s], be_args[e])
            args = args + [be_args[i] for i in starts.tolist()]

    if truncated and parsed == 0:
        raise InputError(path, f"not valid JSON ({truncated})",
                         "expected Chrome trace JSON; the file may be truncated or not JSON at all")
    if len(x["ts"]) == 0 and not counters:
        raise InputError(path, "holds no usable trace events (no X/B/E/i/C events with timestamps)",
                         "check that this is a Chrome trace (chrome://tracing / PyTorch profiler JSON)")

    events, counts = frame.build_events(
        pid=x["pid"], tid=x["tid"], start=x["ts"], dur=x["dur"], name_codes=x["name"], names=names.labels,
        channel_codes=x["cat"], channels=cats.labels, source_format=FORMAT, device_map=device_map, args=args)
    warnings["partial_overlap"] += counts.get("partial_overlap", 0)
    for label, synthetic in ids.synthetic.items():
        process_names.setdefault(synthetic, label)
    threads = frame.build_threads(events, process_names, thread_names)
    counter_frame = _counter_frame(counters)

    metadata: dict[str, object] = dict(hasher.result())
    metadata["chrome.events_read"] = parsed
    if skipped:
        metadata["chrome.skipped_phases"] = json.dumps(dict(sorted(skipped.items())))
    for key, count in sorted(warnings.items()):
        if count:
            metadata[f"warnings.{key}"] = count
    if truncated:
        metadata["warnings.truncated"] = truncated
    target = {"source_format": [FORMAT]}
    return Profile(path.name.removesuffix(".gz").removesuffix(".json") or path.stem,
                   {"target": target, "events": events, "threads": threads, "counters": counter_frame},
                   source=str(path), metadata=metadata)


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
    if ts is None or not isinstance(args, dict):
        warnings["missing_fields"] += 1
        return
    pid = ids.one(ev.get("pid"))
    name = str(ev.get("name", ""))
    if ev.get("id") is not None:
        name = f"{name} {ev['id']}"
    for series, value in args.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            rows.append((pid, name, str(series), float(ts), float(value)))


def _counter_frame(rows: list[tuple]) -> pd.DataFrame | None:
    if not rows:
        return None
    pid, name, series, ts, value = zip(*rows, strict=True)
    return pd.DataFrame({"pid": np.asarray(pid, dtype=np.int64), "name": pd.Categorical(name),
                         "series": pd.Categorical(series), "ts_us": np.asarray(ts, dtype=np.float64),
                         "value": np.asarray(value, dtype=np.float64)})


def _metadata_event(ev: dict, ids: _Ids, process_names: dict, thread_names: dict) -> None:
    args = ev.get("args")
    label = args.get("name") if isinstance(args, dict) else None
    if label is None:
        return
    kind = ev.get("name")
    pid = ids.one(ev.get("pid"))
    if kind == "process_name":
        process_names[pid] = str(label)
    elif kind == "thread_name":
        thread_names[(pid, ids.one(ev.get("tid")))] = str(label)


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
