"""Limits that keep popprof bounded in memory and time on hostile or broken input.

Each limit has a default, an environment variable and a name for the global
``popprof --limit NAME=VALUE`` option (which sets the same variable for the
run). Exceeding one is bad input: one line naming the file, the limit and how
to raise it, exit code 2. See ``docs/limits.md``.
"""

from __future__ import annotations

import os
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
            "the bytes of an input read whole (a text summary or log, SDK 1.x JSON parsed in one go), "
            "after decompression",
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


def get(name: str) -> int:
    """The value of limit ``name``: its environment variable when set and valid, else its default."""
    limit = LIMITS[name]
    raw = os.environ.get(limit.env, "").strip()
    if not raw:
        return limit.default
    try:
        return parse_value(raw, limit.unit)
    except ValueError as exc:
        raise UsageError(f"${limit.env}: {exc}") from None


def set_from_option(assignment: str) -> None:
    """Apply ``NAME=VALUE`` from ``popprof --limit`` by setting the limit's environment variable."""
    name, sep, value = assignment.partition("=")
    name = name.strip().lower().replace("_", "-")
    if not sep or name not in LIMITS:
        raise UsageError(f"--limit {assignment!r}: expected NAME=VALUE with NAME one of {', '.join(LIMITS)}")
    limit = LIMITS[name]
    try:
        parse_value(value, limit.unit)
    except ValueError as exc:
        raise UsageError(f"--limit {name}: {exc}") from None
    os.environ[limit.env] = value.strip()


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
