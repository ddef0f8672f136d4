"""Column building blocks of the Chrome trace reader: string interning, pid / tid mapping, numpy column
chunks, and the conversions of raw JSON values (times, ids, Kineto's ``args`` fields) into columns."""

from __future__ import annotations

import contextlib
import itertools
import json
import operator
import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from ...trace.ids import SYNTHETIC_ID_BASE
from . import kernels


class Interner:
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


class Ids:
    """pid / tid values to int64; non-integer ids (strings) get stable synthetic ids and keep their text."""

    FIRST_SYNTHETIC = SYNTHETIC_ID_BASE

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


class Columns:
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


def json_text(value: object) -> str:
    try:
        import orjson

        return orjson.dumps(value).decode()
    except (ImportError, TypeError):
        return json.dumps(value, default=str)


@dataclass
class Parsed:
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
    #: a merge's flows: the parts' column sets in file order, joined only when the flows table is built
    flow_parts: list[dict] = field(default_factory=list)
    #: flows with a timestamp: those in ``flows`` / ``flow_parts``, or all that a pass without them counted
    flow_count: int = 0

    def flow_chunks(self) -> list[dict]:
        """The flows as column sets in file order (one for a single pass, one per part after a merge)."""
        return self.flow_parts or ([self.flows] if self.flows else [])

    @classmethod
    def empty(cls, error: str = "") -> Parsed:
        """A pass that collected nothing (``error``: why it stopped, empty for none)."""
        return cls([], [], {}, [], {}, np.zeros(0, bool), [], [], {}, {}, {}, Counter(), Counter(), 0, error)


#: args fields kept as columns: Kineto's GPU stream, launch correlation id and device
_ARG_FIELDS = (("stream", "stream"), ("corr", "correlation"), ("device", "device"))
_EMPTY: dict = {}
_NAN = float("nan")
_GET_ARGS_OR_EMPTY = operator.methodcaller("get", "args", _EMPTY)


FLOW_KEYS = (
    ("pid", np.int64),
    ("tid", np.int64),
    ("ts", np.float64),
    ("id", object),
    ("phase", np.int32),
    ("name", np.int32),
    ("cat", np.int32),
    ("bp", np.int32),
)


def arrow_ints(values: pa.Array) -> np.ndarray:
    """pid / tid from Arrow: a missing one is 0, as :meth:`Ids.one` maps ``None``."""
    return kernels.fill_null(values, 0).to_numpy()


def arrow_floats(values: pa.Array) -> np.ndarray:
    """Numbers as float64, NaN where missing (or not a time: see :func:`finite_times`)."""
    return finite_times(kernels.cast(values, pa.float64()).to_numpy(zero_copy_only=False))


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


def id_texts(values: list) -> pa.Array:
    """Flow ids as text (ids are integers in kineto's traces: converted in C, no Python strings)."""
    try:
        numbers = np.asarray(values)
        if numbers.ndim == 1 and numbers.dtype.kind in "iu":
            # from the buffer: ``pa.array`` of an ndarray imports ``numpy.ma`` (about 12 ms in a parse worker)
            numbers = np.ascontiguousarray(numbers)
            ints = pa.Array.from_buffers(
                pa.from_numpy_dtype(numbers.dtype), len(numbers), [None, pa.py_buffer(numbers)]
            )
            return kernels.cast(ints, pa.string())
    except (TypeError, ValueError, OverflowError):
        pass
    return pa.array(
        [None if v is None else v if type(v) is str else str(v) for v in values], type=pa.string()
    )


def concat_flows(chunks: list[dict], *, keep: bool = False) -> dict:
    """One flow column set from chunks in order (ids: one arrow string array). The chunks are emptied as
    their columns are joined (freed as it goes), unless ``keep``."""
    take = dict.get if keep else dict.pop
    return {
        key: pa.concat_arrays([take(c, key) for c in chunks])
        if key == "id"
        else np.concatenate([take(c, key) for c in chunks])
        for key, _ in FLOW_KEYS
    }


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


def arg_fields(events: list) -> dict[str, np.ndarray]:
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
