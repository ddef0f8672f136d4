"""The page checksums of the files a query reads, checked once per file: ``cache/verified.parquet``.

DuckDB reads Parquet without checking page CRC-32s, so a byte changed inside a data page of a store file can
read as another value, unsaid. Before popprof's readers (``store ls``, ``query``, ``trend``, ``fleet``) hand a
local store's files to DuckDB, every page of each file is read once with pyarrow with its checksum checked
(:func:`~.catalogue.verify_pages`); a file failing it is one line naming it and ``store fsck``, exit 2.

Store files are never written in place (each is written under a temporary name and renamed), so a file that
passed is remembered by its name, size, modification time (ns) and inode, as the catalogue cache remembers its
rows (:mod:`.catalogue_cache`), and is not read again while those are unchanged: a second read of the store
costs one ``stat`` per file. A byte changed through the file system changes the modification time, and the file
is checked again; damage that leaves all three as they were (a disk's own bit rot after the check, a hand
restoring the time) is what ``store fsck`` finds, which reads every page every time. A store popprof cannot
write is checked on every read; object stores are not checked on read (each object is written whole, by one
PUT; ``store fsck`` checks them). Deleting the file is always safe: the next read checks every file again.
"""

from __future__ import annotations

import contextlib
import os

import pyarrow as pa

from .layout import Location

#: The store-relative path of the record of checked files.
VERIFIED = "cache/verified.parquet"
_SCHEMA = pa.schema(
    [("_rel", pa.string()), ("_mtime_ns", pa.int64()), ("_size", pa.int64()), ("_ino", pa.int64())]
)


def _stat(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


def _recorded(location: Location) -> dict[str, tuple[int, int, int]]:
    """The files checked before, as (mtime ns, size, inode) by store-relative name; empty when the record is
    missing, a symbolic link, of other columns, or cannot be read (a page failing its own checksum)."""
    import pyarrow.parquet as pq

    path = location.path(VERIFIED)
    real = os.path.join(os.path.realpath(location.root), *VERIFIED.split("/"))
    if os.path.realpath(path) != real or not os.path.isfile(path):
        return {}
    try:
        table = pq.read_table(path, page_checksum_verification=True)
        if not table.schema.remove_metadata().equals(_SCHEMA):
            return {}
        columns = [table[name].to_pylist() for name in _SCHEMA.names]
    except (OSError, ValueError, pa.ArrowException):
        return {}
    return {rel: (mtime, size, ino) for rel, mtime, size, ino in zip(*columns, strict=True)}


def check(location: Location, files: list[str]) -> int:
    """Check the page checksums of the store-relative ``files`` not checked before as they are now (a local
    store; nothing for an object store); returns how many were read. A page failing its checksum, or one that
    cannot be decoded, is :func:`~.catalogue.damaged` (InputError, exit 2). Files that passed are recorded
    (atomically; a store that cannot be written is checked again on its next read)."""
    from .catalogue import damaged, verify_pages, write_parquet

    if not location.local or not files:
        return 0
    known = _recorded(location)
    now = {rel: _stat(location.path(rel)) for rel in files}
    fresh = [rel for rel, st in now.items() if st is not None and known.get(rel) != st]
    for rel in fresh:
        try:
            verify_pages(location, rel)
        except FileNotFoundError:
            now[rel] = None  # gone since it was listed (a compaction): DuckDB's read says so, if it is read
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise damaged(location, rel, exc) from None
    if not fresh:
        return 0
    keep = {rel: st for rel, st in known.items() if rel not in now and _stat(location.path(rel)) == st}
    keep.update({rel: st for rel, st in now.items() if st is not None})
    names = sorted(keep)
    table = pa.table(
        [pa.array(names, pa.string())]
        + [pa.array([keep[n][i] for n in names], pa.int64()) for i in range(3)],
        schema=_SCHEMA,
    )
    with contextlib.suppress(
        OSError, pa.ArrowException
    ):  # a store this reader cannot write: checked next time
        write_parquet(location, VERIFIED, table)
    return len(fresh)
