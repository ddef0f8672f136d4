"""A Profile whose tables are built on first use (a log with hundreds of summaries is read quickly).

The reader parses and validates everything up front (bad input still fails at read time, warnings
are still given at read time); only the construction of the pandas tables, which costs several
milliseconds per table, waits until something asks for a table or the metadata. After that the
object behaves exactly as a :class:`~popprof.model.profile.Profile` built eagerly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pandas as pd

from ..model.profile import Profile

Build = Callable[[], tuple[Mapping[str, pd.DataFrame], Mapping[str, object]]]


class LazyProfile(Profile):
    """A :class:`Profile` built by ``build() -> (tables, metadata)`` the first time its tables are used."""

    def __init__(self, name: str, build: Build, *, source: str = "", conformed: bool = False) -> None:
        """``conformed``: ``build`` returns tables already conformed to the schema (e.g. row ranges of
        frames conformed once for a whole file), kept as they are; otherwise they are conformed."""
        self.name = name
        self.source = source
        self._cache: dict[str, object] = {}
        self._deferred = {}  # Profile's tables built on first use: none before build() has run
        self._build: Build | None = build
        self._conformed = conformed
        self._built: dict[str, pd.DataFrame] | None = None

    @property
    def _tables(self) -> dict[str, pd.DataFrame]:  # type: ignore[override]
        if self._built is None:
            build, self._build = self._build, None
            tables, metadata = build() if build is not None else ({}, {})
            if self._conformed:
                self._built = dict(tables)
                self.update_metadata(metadata)
            else:
                Profile.__init__(self, self.name, tables, source=self.source, metadata=metadata)
        return self._built  # type: ignore[return-value]

    @_tables.setter
    def _tables(self, value: dict[str, pd.DataFrame]) -> None:
        self._built = value
