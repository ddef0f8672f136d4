"""The catalogue (``runs``): find a stored run, write its row last, list the live runs."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..model.errors import InputError
from .layout import COMPACT_PREFIX, Location, run_file, run_key
from .schemas import RUNS


def read_parquet(location: Location, rel: str, columns: list[str] | None = None) -> pa.Table:
    """One Parquet file of the store as an Arrow table, each data page's CRC-32 checked where the file has one
    (files written before 2026-12-07 carry none and read as before); a page failing it, or one that cannot be
    decoded, is one InputError naming the file (:func:`damaged`)."""
    try:
        if location.local:
            return pq.read_table(location.path(rel), columns=columns, page_checksum_verification=True)
        with location.fs.open(location._bare(rel), "rb") as handle:  # type: ignore[union-attr]
            return pq.read_table(handle, columns=columns, page_checksum_verification=True)
    except FileNotFoundError:
        raise
    except (OSError, pa.ArrowException) as exc:
        raise damaged(location, rel, exc) from None


def damaged_detail(exc: BaseException) -> str:
    """Why a store file that pyarrow cannot read through is damaged, in words: a page failing its CRC-32 (a
    byte changed since it was written), or Arrow's reason (a file cut off, a page of a file written before
    page checksums that no longer decodes)."""
    reason = " ".join(str(exc).split()) or type(exc).__name__
    if "CRC" in reason:
        return f"a data page fails its checksum: changed since it was written ({reason})"
    return f"it cannot be read through ({reason})"


def damaged(location: Location, rel: str, exc: BaseException) -> InputError:
    """The one line (exit 2) for a damaged store file: the file, why, and ``store fsck``."""
    return InputError(
        location.path(rel),
        f"damaged store file: {damaged_detail(exc)}",
        "popprof store fsck lists the files it cannot read",
    )


def verify_pages(location: Location, rel: str) -> None:
    """Read every page of a store file with its CRC-32 checked, a row group at a time (nothing kept): an
    ArrowException (or OSError) when one fails its checksum or cannot be decoded. Bound the file first
    (:func:`~.expansion.check_expansion`)."""

    def scan(source) -> None:
        parquet = pq.ParquetFile(source, page_checksum_verification=True)
        for group in range(parquet.num_row_groups):
            parquet.read_row_group(group)

    if location.local:
        scan(location.path(rel))
        return
    with location.fs.open(location._bare(rel), "rb") as handle:  # type: ignore[union-attr]
        scan(handle)


def write_parquet(location: Location, rel: str, table: pa.Table) -> None:
    """Write ``table`` at ``rel`` (temporary name and rename locally; one PUT remotely), with each data page's
    CRC-32 (as bundles carry them: :func:`read_parquet`, ``store fsck`` and ``compact`` check them)."""
    with location.writing(rel) as target:
        pq.write_table(table, target, compression="zstd", write_page_checksum=True)


def stored_rows(location: Location, run_id: str, profile: str) -> list[dict]:
    """Every catalogue row of (run_id, profile), in per-run and compacted files, latest ingest first."""
    key = run_key(run_id, profile)
    rows: list[dict] = []
    # ``<key>--<ingest>.parquet``, or ``<key>.parquet`` as stores before issue 45 named it
    for rel in location.files("runs", f"month=*/{key}*.parquet"):
        rows += [
            dict(row, _file=rel)
            for row in read_parquet(location, rel).to_pylist()
            if row["run_id"] == run_id and row["profile"] == profile
        ]
    for rel in location.files("runs", f"month=*/{COMPACT_PREFIX}*.parquet"):
        table = read_parquet(location, rel)
        table = table.filter(pc.and_(pc.equal(table["run_id"], run_id), pc.equal(table["profile"], profile)))
        rows += [dict(row, _file=rel) for row in table.to_pylist()]
    rows.sort(key=lambda r: (r["ingested_at"], r["ingest_id"]), reverse=True)
    return rows


def known_profiles(location: Location, names: set[str]) -> set[str]:
    """Which of the profile ``names`` have a run in the store (any ingest, live or not). Reads only the
    catalogue files whose name can hold one of them (the profile's slug is in a per-run row's name) and the
    compacted ones' ``profile`` column."""
    if not names:
        return set()
    from .layout import slug

    slugs = {slug(name) for name in names}
    found: set[str] = set()
    for rel in location.files("runs", "month=*/*.parquet"):
        stem = rel.rsplit("/", 1)[-1].removesuffix(".parquet")
        if not stem.startswith(COMPACT_PREFIX) and not any(f"--{s}--" in stem for s in slugs):
            continue
        found.update(read_parquet(location, rel, columns=["profile"])["profile"].to_pylist())
        if names <= found:
            break
    return names & found


def write_row(location: Location, month: str, row: dict) -> str:
    """Write a run's catalogue row (the commit marker of an add); returns its store-relative path."""
    rel = run_file("runs", month, run_key(row["run_id"], row["profile"]), row["ingest_id"])
    write_parquet(location, rel, pa.Table.from_pylist([row], schema=RUNS))
    return rel
