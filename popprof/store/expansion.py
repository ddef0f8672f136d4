"""How much memory a store file would take once read, judged from its Parquet footer before it is read:
the bound compaction and the catalogue cache apply to every file they read whole."""

from __future__ import annotations

import os

from .layout import Location


def expansion(location: Location, rel: str) -> tuple[int, int]:
    """(bytes its columns take uncompressed, by the footer; the file's size) of one store file."""
    import pyarrow.parquet as pq

    if location.local:
        metadata = pq.read_metadata(location.path(rel))
        size = os.path.getsize(location.path(rel))
    else:
        with location.fs.open(location._bare(rel), "rb") as handle:  # type: ignore[union-attr]
            metadata = pq.read_metadata(handle)
            size = handle.size
    expanded = sum(
        metadata.row_group(g).column(c).total_uncompressed_size
        for g in range(metadata.num_row_groups)
        for c in range(metadata.num_columns)
    )
    return expanded, size


def check_expansion(location: Location, rel: str) -> None:
    """LimitExceeded when a store file would take far more memory than its size (popprof's Parquet limit, as
    for a bundle's table: a 28 KB file holding a 400 MB string), judged from its footer before it is read."""
    from ..io import limits, units

    expanded, size = expansion(location, rel)
    if expanded > limits.PARQUET_RATIO_FLOOR and expanded > limits.get("parquet-ratio") * max(size, 1):
        raise limits.LimitExceeded(
            location.path(rel),
            "parquet-ratio",
            f"a store file that expands {units.count(expanded // max(size, 1))}x "
            f"(about {units.nbytes(expanded)} from {units.nbytes(size)})",
        )
