"""The Profile: named tables with one schema, plus metadata.

Readers are the only code that knows a file format; each returns a
:class:`Profile`. Everything else reads only its tables.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import pandas as pd

from .errors import MissingTableError
from .schema import TABLES, conform

T = TypeVar("T")

#: What to say when a table is absent, by table.
NEEDS_HINT: dict[str, str] = {
    "steps": "needs an execution profile (run with autoReport.all or autoReport.outputExecutionProfile)",
    "runs": "needs an execution profile",
    "tiles": "needs per-tile memory (a profile.pop, an SDK 1.x JSON profile or a bundle of one)",
    "tile_memory": "needs per-tile memory by category",
    "liveness": "needs liveness information (a profile.pop or a bundle of one)",
    "operations": "needs debug information (open profile.pop with its debug.cbor)",
    "events": "needs a trace (.pvti or Chrome trace JSON)",
    "threads": "needs a trace (.pvti or Chrome trace JSON)",
    "counters": "needs a trace with counters",
    "step_tile_cycles": "needs per-tile cycles (read with tile_cycles=True)",
    "execution_totals": "needs a Poplar text summary with an Execution section",
    "vertex_cycles": "needs a Poplar text summary with 'Cycles by vertex type'",
    "out_of_memory": "needs Poplar's out-of-memory messages (a failed compilation's log)",
    "allocations": "needs PyTorch's allocator events (a trace recorded with profile_memory=True)",
    "cpu_slices": "needs host threads' context switches (nsys profile --cpuctxsw, exported to SQLite)",
    "cpu_samples": "needs CPU samples with call stacks (nsys profile --sample=cpu, exported to SQLite)",
}


@dataclass(frozen=True)
class Deferred:
    """A table a reader builds on first use: ``rows`` rows (known before it is built), made by ``build()``.

    For a large table most commands never read (a trace's ``flows``, which only the timeline, the bundle
    and queries use): ``popprof summary`` of a 600,000-event trace skipped 15-20 ms and 14 MiB by not
    building it. ``build`` must be repeatable (a :meth:`Profile.copy` builds its own) and its frame is
    conformed to the schema like any table.
    """

    rows: int
    build: Callable[[], pd.DataFrame]


#: Target columns that count tiles or IPUs: zero or less is read as unknown by :meth:`Profile.target_value`.
COUNTS_OF_TILES = frozenset({"tiles_per_ipu", "num_tiles", "num_ipus"})
#: Target figures that divide (cycles into time, bytes into a tile's share): zero or less, or not finite, is
#: read as unknown by :meth:`Profile.target_value` (a negative clock gave a negative run time).
POSITIVE_FIGURES = COUNTS_OF_TILES | {"clock_hz", "bytes_per_tile"}


class Profile:
    """A profile as tables. Access tables as attributes (``profile.tiles``) or with ``profile[name]``.

    ``name`` is the engine or file stem; ``source`` the path it came from.
    Tables that the source cannot fill are absent: :meth:`has` tells, and
    accessing one raises :class:`~popprof.model.errors.MissingTableError` saying
    what would be needed.
    """

    def __init__(
        self,
        name: str,
        tables: Mapping[str, pd.DataFrame | dict | Deferred],
        *,
        source: str = "",
        metadata: Mapping[str, object] | None = None,
    ) -> None:
        self.name = name
        self.source = source
        self._tables: dict[str, pd.DataFrame] = {}
        self._deferred: dict[str, Deferred] = {}  # built into _tables on first use
        self._cache: dict[str, object] = {}
        for table, frame in tables.items():
            if frame is None:
                continue
            if isinstance(frame, Deferred):
                self._deferred[table] = frame
            else:
                self._tables[table] = conform(table, frame)
        if metadata:
            self.update_metadata(metadata)

    # -- tables ---------------------------------------------------------
    @property
    def table_names(self) -> list[str]:
        """Names of the tables present, in schema order."""
        return [t for t in TABLES if t in self._tables or t in self._deferred]

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables present, by name (a new dict; the frames are shared)."""
        return {t: self._materialised(t) for t in self.table_names}

    def _materialised(self, name: str) -> pd.DataFrame:
        """Table ``name`` (present), built first when it was deferred."""
        deferred = self._deferred.pop(name, None)
        if deferred is not None:
            self._tables[name] = conform(name, deferred.build())
        return self._tables[name]

    def rows(self, name: str) -> int:
        """Rows of a table present (without building a deferred one); 0 when absent."""
        if name in self._deferred:
            return self._deferred[name].rows
        frame = self._tables.get(name)
        return 0 if frame is None else len(frame)

    def has(self, *names: str) -> bool:
        """True when every named table is present and has at least one row."""
        return all(self.rows(n) > 0 for n in names)

    def missing(self, names: Iterable[str]) -> list[str]:
        """The named tables that are absent or empty."""
        return [n for n in names if not self.has(n)]

    def table(self, name: str) -> pd.DataFrame:
        """Return a table, or raise :class:`MissingTableError` naming what it needs."""
        if name not in TABLES:
            raise KeyError(f"unknown table {name!r}; known: {', '.join(TABLES)}")
        if name not in self._tables and name not in self._deferred:
            raise MissingTableError(name, self.name, NEEDS_HINT.get(name, ""))
        return self._materialised(name)

    def get(self, name: str) -> pd.DataFrame | None:
        """Return a table or ``None`` when absent."""
        return self._materialised(name) if name in self._tables or name in self._deferred else None

    def cached(self, key: str, compute: Callable[[], T]) -> T:
        """Memoise a value derived from the tables.

        The cache is cleared when a table is replaced and around each
        :func:`popprof.metrics.compute` call (tables can be changed in place).
        """
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]  # type: ignore[return-value]

    def set_table(self, name: str, frame: pd.DataFrame | dict | None) -> None:
        """Add or replace a table (conformed to the schema); ``None`` removes it."""
        self._cache.clear()
        self._deferred.pop(name, None)
        if frame is None:
            self._tables.pop(name, None)
        else:
            self._tables[name] = conform(name, frame)

    def __getitem__(self, name: str) -> pd.DataFrame:
        return self.table(name)

    def __getattr__(self, name: str) -> pd.DataFrame:
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in TABLES:
            close = difflib.get_close_matches(name, list(TABLES), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise AttributeError(f"{type(self).__name__!r} has no attribute or table {name!r}{hint}")
        return self.table(name)

    def __dir__(self) -> list[str]:
        """Attributes plus the tables present (tab completion in a notebook offers them)."""
        return sorted(set(super().__dir__()) | set(self.table_names))

    def __contains__(self, name: object) -> bool:
        return name in self._tables or name in self._deferred

    # -- metadata -------------------------------------------------------
    @property
    def meta(self) -> dict[str, str]:
        """The metadata table as a dict (key -> value)."""
        frame = self._tables.get("metadata")
        if frame is None:
            return {}
        return dict(zip(frame["key"].tolist(), frame["value"].tolist(), strict=True))

    def update_metadata(self, items: Mapping[str, object]) -> None:
        """Set metadata keys (values are stored as strings)."""
        merged = self.meta
        merged.update({str(k): "" if v is None else str(v) for k, v in items.items()})
        self._cache.clear()
        self._tables["metadata"] = conform(
            "metadata", pd.DataFrame({"key": list(merged), "value": list(merged.values())})
        )

    # -- target convenience ---------------------------------------------
    def target_value(self, column: str, default: object = None) -> object:
        """One value of the single-row target table, or ``default`` when unknown (also for a count of
        tiles or IPUs, a clock or a tile's capacity that is zero or less or not finite: nothing can be sized or
        divided by it)."""
        frame = self._tables.get("target")
        if frame is None or frame.empty or column not in frame.columns:
            return default
        value = frame[column].iloc[0]
        if pd.isna(value) or (column in POSITIVE_FIGURES and not 0 < float(value) < math.inf):
            return (
                default  # a target of zero tiles or a negative clock (a tampered bundle) is no figure at all
            )
        return value

    @property
    def source_format(self) -> str:
        return str(self.target_value("source_format", self.meta.get("source_format", "unknown")))

    def copy(self, name: str | None = None) -> Profile:
        """A shallow copy (tables are copied lazily by pandas copy-on-write)."""
        tables: dict[str, pd.DataFrame | Deferred] = {k: v.copy() for k, v in self._tables.items()}
        tables.update(self._deferred)  # each copy builds its own
        return Profile(name or self.name, tables, source=self.source)

    def __repr__(self) -> str:
        parts = ", ".join(f"{t}[{self.rows(t):,}]" for t in self.table_names)
        return f"<Profile {self.name!r} ({self.source_format}): {parts}>"

    def _repr_html_(self) -> str:
        """The profile in Jupyter: its tables with rows and columns (``markup/templates/profile.html.j2``)."""
        from ..markup import render

        tables = [(t, f"{len(f):,}", [str(c) for c in f.columns]) for t, f in self.tables.items()]
        return render("profile.html.j2", name=self.name, source_format=self.source_format, tables=tables)
