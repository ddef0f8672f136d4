"""The page checksums of the files a read hands to an engine, checked once per file: ``cache/verified.parquet``.

DuckDB reads Parquet without checking page CRC-32s, so a byte changed inside a data page of a store file can
read as another value, unsaid. Before popprof's readers (``store ls``, ``query``, ``trend``, ``fleet``,
``Store.duckdb``, ``Store.metric``, ``Store.arrow_dataset``) hand a store's files to an engine, every page of
each file is read once with pyarrow with its checksum checked (:func:`~.catalogue.verify_pages`); a file
failing it is one line naming it and ``store fsck``, exit 2. Spark checks its own pages as it reads them
(:mod:`.engine_spark`), so it needs no record.

Store files are never written in place (each is written under a temporary name and renamed, or by one PUT), so
a file that passed is remembered by what changes when it is written again, and is not read again while that is
unchanged. A **local** file: its name, size, modification time (ns) and inode, as the catalogue cache remembers
its rows (:mod:`.catalogue_cache`); a second read costs one ``stat`` per file. An **object** (``s3://``): its
key, size, last-modified time and ETag, from one listing per kind (the listing a read makes anyway); a PUT
gives a new ETag and time, so an object written again is checked again. The record lives in the store itself
(``cache/verified.parquet``, one PUT): readers of an object store are often short-lived CI jobs with no local
state, so a record on the reader's machine would be empty on nearly every read; who can change the record can
change the files it vouches for, so it trusts nobody the files do not. It holds names, sizes, times and ETags,
never credentials.

Damage that leaves the identity as it was (a disk's own bit rot after the check, a hand restoring the time, an
object changed between the listing and the engine's read) is what ``store fsck`` finds, which reads every page
every time. A store popprof cannot write (read-only credentials) is checked on every read. Deleting the record
is always safe: the next read checks every file again.
"""

from __future__ import annotations

import contextlib
import os

import pyarrow as pa

from .layout import Location

#: The store-relative path of the record of checked files.
VERIFIED = "cache/verified.parquet"
_SCHEMA = pa.schema(
    [
        ("_rel", pa.string()),
        ("_mtime_ns", pa.int64()),
        ("_size", pa.int64()),
        ("_ino", pa.int64()),  # null for an object
        ("_etag", pa.string()),  # null for a local file
    ]
)
#: The record as the first popprof to write one wrote it (local files only): read, its ETags null.
_SCHEMA_LOCAL = pa.schema(list(_SCHEMA)[:4])

#: What a file is checked as: (modification time ns, size, inode or None, ETag or None).
Identity = tuple[int, int, int | None, str | None]


def _stat(path: str) -> Identity | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino, None


def _kind_of(rel: str) -> str:
    """The kind directory of a store file (``metrics``, ``tables/steps``): everything before ``/month=``."""
    return rel.split("/month=", 1)[0]


def identities(location: Location, files: list[str]) -> dict[str, Identity | None]:
    """The identity of each store-relative file (None when it is gone): a ``stat`` each locally, one listing
    per kind directory on an object store (fresh, never fsspec's cached listing: an object written again since
    must not pass as the one checked)."""
    if location.local:
        return {rel: _stat(location.path(rel)) for rel in files}
    fs = location.fs
    prefix = location._bare("") + "/"
    listed: dict[str, Identity] = {}
    for kind in sorted({_kind_of(rel) for rel in files}):
        # what fsspec remembers of the directory and those under it goes (its listing adds to what it remembers,
        # never replaces it): the check and the engine's read after it open the objects as listed now, not by the
        # ETag of an object since written again
        top = location._bare(kind)
        for cached in [k for k in list(getattr(fs, "dircache", {})) if k == top or k.startswith(top + "/")]:
            fs.invalidate_cache(cached)  # type: ignore[union-attr]
        try:
            found = fs.find(location._bare(kind), detail=True)  # type: ignore[union-attr]
        except FileNotFoundError:
            continue
        for name, info in found.items():
            modified = info.get("LastModified") or info.get("mtime")
            stamp = int(modified.timestamp() * 1e9) if hasattr(modified, "timestamp") else int(modified or 0)
            etag = info.get("ETag") or info.get("etag")
            listed[name.removeprefix(prefix)] = (stamp, int(info.get("size") or 0), None, etag and str(etag))
    return {rel: listed.get(rel) for rel in files}


def _read_record(location: Location) -> pa.Table | None:
    """The record's table, or None when there is none (or, locally, it is a symbolic link)."""
    import pyarrow.parquet as pq

    if location.local:
        path = location.path(VERIFIED)
        real = os.path.join(os.path.realpath(location.root), *VERIFIED.split("/"))
        if os.path.realpath(path) != real or not os.path.isfile(path):
            return None
        return pq.read_table(path, page_checksum_verification=True)
    try:
        with location.fs.open(location._bare(VERIFIED), "rb") as handle:  # type: ignore[union-attr]
            return pq.read_table(handle, page_checksum_verification=True)
    except FileNotFoundError:
        return None


def _recorded(location: Location) -> dict[str, Identity]:
    """The files checked before, by store-relative name; empty when the record is missing, a symbolic link, of
    other columns, or cannot be read (a page failing its own checksum)."""
    try:
        table = _read_record(location)
        if table is None:
            return {}
        schema = table.schema.remove_metadata()
        if schema.equals(_SCHEMA_LOCAL):
            table = table.append_column("_etag", pa.nulls(len(table), pa.string()))
        elif not schema.equals(_SCHEMA):
            return {}
        columns = [table[name].to_pylist() for name in _SCHEMA.names]
    except (OSError, ValueError, pa.ArrowException):
        return {}
    return {rel: (mtime, size, ino, etag) for rel, mtime, size, ino, etag in zip(*columns, strict=True)}


def check(location: Location, files: list[str]) -> int:
    """Check the page checksums of the store-relative ``files`` not checked before as they are now; returns how
    many were read. A page failing its checksum, or one that cannot be decoded, is :func:`~.catalogue.damaged`
    (InputError, exit 2). Files that passed are recorded (atomically: a temporary name and a rename locally, one
    PUT on an object store; a store that cannot be written is checked again on its next read)."""
    from .catalogue import damaged, verify_pages, write_parquet

    if not files:
        return 0
    known = _recorded(location)
    now = identities(location, files)
    # an object its file system gives no ETag for (not S3) is known by nothing that changes with its bytes:
    # checked on every read
    fresh = [
        rel
        for rel, seen in now.items()
        if seen is not None and (known.get(rel) != seen or (not location.local and seen[3] is None))
    ]
    for rel in fresh:
        try:
            verify_pages(location, rel)
        except FileNotFoundError:
            now[rel] = (
                None  # gone since it was listed (a compaction): the engine's read says so, if it is read
            )
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise damaged(location, rel, exc) from None
    if not fresh:
        return 0
    others = [rel for rel in known if rel not in now]
    still = identities(location, others) if others else {}
    keep = {rel: known[rel] for rel in others if still.get(rel) == known[rel]}
    keep.update({rel: seen for rel, seen in now.items() if seen is not None})
    names = sorted(keep)
    table = pa.table(
        [pa.array(names, pa.string())]
        + [pa.array([keep[n][i] for n in names], field.type) for i, field in enumerate(list(_SCHEMA)[1:])],
        schema=_SCHEMA,
    )
    with contextlib.suppress(OSError, ValueError, pa.ArrowException):  # cannot write: checked next time
        write_parquet(location, VERIFIED, table)
    return len(fresh)
