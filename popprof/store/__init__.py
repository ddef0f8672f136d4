"""The run store: many runs as Parquet tables partitioned by month, read by DuckDB, Spark and the rest.

See ``docs/store.md``. ``popprof.store.open(STORE)`` gives a :class:`Store`; ``add`` ingests runs.
"""

from __future__ import annotations

from .api import Store, init
from .api import open_store as open  # noqa: A001
from .ingest import AddResult, StoreConflict, add

__all__ = ["AddResult", "Store", "StoreConflict", "add", "init", "open"]
