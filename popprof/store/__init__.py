"""The run store: many runs as Parquet tables partitioned by month, read by DuckDB, Spark and the rest.

See ``docs/store.md``. ``popprof.store.open(STORE)`` gives a :class:`Store`; ``add`` ingests runs.
"""

from __future__ import annotations

from .api import Store, init
from .api import open_store as open  # noqa: A001
from .ingest import AddResult, StoreConflict, add


def add_spark(spark, store, sources, **options):  # noqa: ANN001, ANN003, ANN201
    """Add ``sources`` as runs of ``store`` on the executors of the SparkSession ``spark`` (see
    :func:`popprof.store.distributed.add_spark`); returns what was added."""
    from .distributed import add_spark as run

    return run(spark, store, sources, **options)


__all__ = ["AddResult", "Store", "StoreConflict", "add", "add_spark", "init", "open"]
