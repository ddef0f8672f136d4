"""Limits that keep popprof bounded in memory and time on hostile or broken input.

Each limit has a default, an environment variable and a name for the global
``popprof --limit NAME=VALUE`` option. Exceeding one is bad input: one line
naming the file, the limit and how to raise it, exit code 2. See ``docs/limits.md``.

The limits in force are a :class:`Limits` value held in a context variable,
never written to ``os.environ``: the CLI sets it for one run (``--limit``) and
gives the caller's back when the run ends; Python code sets it for a block
(:func:`using`); worker threads and processes of :mod:`popprof.io.parallel`
receive the caller's value as an argument (:func:`enter`). A limit given
neither way comes from its environment variable when set, else its default.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from ..model.errors import InputError, UsageError
from . import units


@dataclass(frozen=True)
class Limit:
    """One limit: its CLI name, environment variable, default and what it bounds."""

    name: str
    env: str
    default: int
    unit: str  # "bytes", "levels", "rows", "seconds" or "ratio"
    what: str


LIMITS: dict[str, Limit] = {
    limit.name: limit
    for limit in (
        Limit(
            "text-bytes",
            "POPPROF_MAX_TEXT_BYTES",
            256 << 20,
            "bytes",
            "the bytes of an input read whole (a text summary or log, SDK 1.x JSON parsed in one go, rocprofv3 "
            "JSON), after decompression",
        ),
        Limit("line-bytes", "POPPROF_MAX_LINE_BYTES", 1 << 20, "bytes", "one line of a text input"),
        Limit("string-bytes", "POPPROF_MAX_STRING_BYTES", 64 << 20, "bytes", "one JSON string"),
        Limit("json-depth", "POPPROF_MAX_JSON_DEPTH", 256, "levels", "the nesting depth of JSON"),
        Limit(
            "event-bytes",
            "POPPROF_MAX_EVENT_BYTES",
            8 << 20,
            "bytes",
            "one event of a Chrome trace parsed whole; a longer one is parsed without its nested arrays and "
            "objects, and what remains must fit in this",
        ),
        Limit(
            "gzip-ratio",
            "POPPROF_MAX_GZIP_RATIO",
            200,
            "ratio",
            "decompressed bytes per compressed byte of a gzip input (checked once 64 MiB are decompressed)",
        ),
        Limit(
            "gzip-bytes",
            "POPPROF_MAX_GZIP_BYTES",
            64 << 30,
            "bytes",
            "the decompressed bytes of a gzip input",
        ),
        Limit(
            "manifest-bytes",
            "POPPROF_MAX_MANIFEST_BYTES",
            16 << 20,
            "bytes",
            "a bundle's manifest (a real one is a few KiB)",
        ),
        Limit(
            "table-rows",
            "POPPROF_MAX_TABLE_ROWS",
            1 << 31,
            "rows",
            "the rows of one table of a bundle, read from the Parquet footer before the table is read",
        ),
        Limit(
            "parquet-ratio",
            "POPPROF_MAX_PARQUET_RATIO",
            1000,
            "ratio",
            "memory a bundle's table takes once read, per byte of its Parquet file, from the footer before "
            "reading (checked above 256 MiB; real tables expand 2-100x, 60 M zero rows in 2 MB 2000x)",
        ),
        Limit(
            "option-bytes",
            "POPPROF_MAX_OPTION_BYTES",
            16 << 20,
            "bytes",
            "a file named by an option or a config: --device-map, --key-file, --policy, --budget, a config file",
        ),
        Limit("query-seconds", "POPPROF_QUERY_SECONDS", 60, "seconds", "the run time of one `popprof query`"),
        Limit(
            "query-memory",
            "POPPROF_QUERY_MEMORY",
            1 << 30,
            "bytes",
            "the memory DuckDB may use in `popprof query`",
        ),
    )
}

#: Decompressed bytes always allowed before the gzip ratio is checked.
GZIP_RATIO_FLOOR = 64 << 20
#: Memory a bundle table may always take before the Parquet ratio is checked.
PARQUET_RATIO_FLOOR = 256 << 20


def parse_value(text: str, unit: str = "bytes") -> int:
    """``"512M"`` -> 536870912 (sizes take k/M/G/T suffixes, powers of 1024); ValueError when not a number."""
    value = units.parse_bytes(text) if unit == "bytes" else units.parse_count(text)
    if value <= 0:
        raise ValueError(f"must be positive: {text!r}")
    return value


def _from_environment(limit: Limit) -> int:
    """Limit ``limit`` from its environment variable when set and valid, else its default."""
    raw = os.environ.get(limit.env, "").strip()
    if not raw:
        return limit.default
    try:
        return parse_value(raw, limit.unit)
    except ValueError as exc:
        raise UsageError(f"${limit.env}: {exc}") from None


@dataclass(frozen=True)
class Limits:
    """The limits given for a run or a block: a field per limit of :data:`LIMITS` (``text-bytes`` is
    ``text_bytes``), ``None`` where the environment variable, else the default, applies.

    Immutable and picklable: handed as it is to worker processes.
    """

    text_bytes: int | None = None
    line_bytes: int | None = None
    string_bytes: int | None = None
    json_depth: int | None = None
    event_bytes: int | None = None
    gzip_ratio: int | None = None
    gzip_bytes: int | None = None
    manifest_bytes: int | None = None
    table_rows: int | None = None
    parquet_ratio: int | None = None
    option_bytes: int | None = None
    query_seconds: int | None = None
    query_memory: int | None = None

    def value(self, name: str) -> int:
        """Limit ``name`` (``"text-bytes"``): the one given here, else its environment variable, else its default."""
        given = getattr(self, _field(name))
        return _from_environment(LIMITS[name]) if given is None else given

    def given(self) -> dict[str, int]:
        """The limits set in this value, by name (``{"text-bytes": 1073741824}``)."""
        return {name: v for name in LIMITS if (v := getattr(self, _field(name))) is not None}

    def replace(self, **values: int | str) -> Limits:
        """A copy with limits set by field name; a value may be text (``text_bytes="1G"``).

        UsageError (one line) for an unknown name or a value that is not a positive number.
        """
        parsed: dict[str, int] = {}
        for key, raw in values.items():
            name = key.replace("_", "-")
            if name not in LIMITS:
                raise UsageError(f"no limit named {name!r}: one of {', '.join(LIMITS)}")
            try:
                parsed[_field(name)] = _positive(raw, LIMITS[name].unit)
            except ValueError as exc:
                raise UsageError(f"limit {name}: {exc}") from None
        return dataclasses.replace(self, **parsed)

    def with_option(self, assignment: str) -> Limits:
        """A copy with ``NAME=VALUE`` of ``popprof --limit`` applied (UsageError, one line, when invalid)."""
        name, sep, value = assignment.partition("=")
        name = name.strip().lower().replace("_", "-")
        if not sep or name not in LIMITS:
            raise UsageError(
                f"--limit {assignment!r}: expected NAME=VALUE with NAME one of {', '.join(LIMITS)}"
            )
        try:
            number = parse_value(value.strip(), LIMITS[name].unit)
        except ValueError as exc:
            raise UsageError(f"--limit {name}: {exc}") from None
        return dataclasses.replace(self, **{_field(name): number})


def _field(name: str) -> str:
    return name.replace("-", "_")


def _positive(value: int | str, unit: str) -> int:
    """``value`` as a positive whole number (text goes through :func:`parse_value`); ValueError otherwise."""
    if isinstance(value, str):
        return parse_value(value, unit)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"must be a positive whole number: {value!r}")
    return value


#: No limit given: every limit from its environment variable, else its default.
DEFAULT = Limits()
_CURRENT: ContextVar[Limits] = ContextVar("popprof_limits", default=DEFAULT)


def current() -> Limits:
    """The limits in force in this context (the CLI's run, a :func:`using` block, a worker's hand-off)."""
    return _CURRENT.get()


def get(name: str) -> int:
    """The value of limit ``name`` in force: given (CLI, :func:`using`), else its environment variable, else its
    default. One context-variable lookup: call it per read, never per event."""
    return _CURRENT.get().value(name)


def enter(limits: Limits) -> None:
    """Make ``limits`` the ones in force in this thread or process from now on: the initializer of a worker
    thread or process, which receives the caller's :func:`current` value as its argument."""
    _CURRENT.set(limits)


def enter_then(limits: Limits, then: Callable[..., None] | None = None, *args: object) -> None:
    """Worker initializer: :func:`enter` ``limits`` (the caller's, handed over as an argument), then
    ``then(*args)`` (the pool's own initializer, if any)."""
    _CURRENT.set(limits)
    if then is not None:
        then(*args)


@contextlib.contextmanager
def using(limits: Limits | None = None, **values: int | str) -> Iterator[Limits]:
    """The limits in force inside the block: ``limits`` (default: the ones in force) with ``values`` set by
    field name, e.g. ``with using(text_bytes="1G"): popprof.open(path)``. Afterwards the previous ones again."""
    chosen = (limits or current()).replace(**values)
    token = _CURRENT.set(chosen)
    try:
        yield chosen
    finally:
        _CURRENT.reset(token)


def how_to_raise(name: str) -> str:
    """``raise it with POPPROF_X=VALUE or popprof --limit name=VALUE``."""
    limit = LIMITS[name]
    return f"raise it with {limit.env}=VALUE or `popprof --limit {name}=VALUE ...`; see docs/limits.md"


class LimitExceeded(InputError):
    """An input goes beyond one of the :data:`LIMITS` (exit code 2, one line)."""

    def __init__(self, path: object, name: str, detail: str) -> None:
        limit = LIMITS[name]
        self.limit_name = name
        self.detail = detail
        super().__init__(
            path,
            f"{detail} is over the limit {name} = {units.amount(get(name), limit.unit)}",
            how_to_raise(name),
        )

    def __reduce__(self) -> tuple:  # raised in worker processes too: keep it picklable
        return (type(self), (self.path, self.limit_name, self.detail))


def string_too_long(path: object, length: int) -> LimitExceeded:
    """The error for a JSON string of more than ``length`` bytes (``string-bytes``)."""
    return LimitExceeded(path, "string-bytes", f"a JSON string of more than {units.nbytes(length)}")
