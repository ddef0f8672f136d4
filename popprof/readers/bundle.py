"""The popprof bundle: a directory with ``manifest.json`` and one Parquet file per table.

The bundle is what leaves the IPU machine: it needs no Poplar SDK, is small,
and is read by anything that reads Parquet (DuckDB, Spark, pandas). Reading a
bundle gives back exactly the tables written (columns, dtypes, values).
See ``docs/bundle.md`` for the manifest format.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa

from .._version import __version__
from ..io import limits, units
from ..io.atomic import atomic_path, refuse_overwriting_inputs
from ..io.jsonwords import JSON_KINDS, json_kind
from ..io.plural import plural
from ..io.versioning import check_format
from ..model.errors import InputError
from ..model.profile import Profile
from ..model.schema import TABLES
from .values import check_measures

FORMAT = "bundle"
MANIFEST = "manifest.json"
BUNDLE_FORMAT = "popprof-bundle"
FORMAT_VERSION = 1
#: Manifest key set to true in each bundle of a directory of bundles that popprof wrote as one output (a
#: redacted run directory): such a directory is an earlier output and may be replaced; other bundles may not.
BUNDLE_SET_KEY = "bundle_set"
#: Bytes a Parquet value takes in memory by Arrow type id (pointers for strings: their bytes are counted
#: from the footer); what is not listed counts 8.
_WIDTH_OF_VARIABLE = 16


def is_bundle(path: Path) -> bool:
    """The one test of "is this a bundle": a directory holding a ``manifest.json`` (whatever it is).

    Reading checks the rest (:func:`read_manifest`): a manifest that is a symlink or a special
    file is then one line naming it, not a directory taken for something else.
    """
    try:
        return Path(path).is_dir() and os.path.lexists(Path(path) / MANIFEST)
    except (OSError, ValueError):
        return False


def manifest_path(bundle_dir: Path) -> Path:
    """Where the manifest of the bundle ``bundle_dir`` is (whether or not it exists)."""
    return Path(bundle_dir) / MANIFEST


def is_manifest(path: Path) -> bool:
    """Whether the file ``path`` is named as a bundle's manifest (its content is not looked at)."""
    return Path(path).name == MANIFEST


def bundles_in(path: Path) -> list[Path]:
    """``[path]`` for a bundle, the bundles directly in ``path`` (sorted) for a directory of bundles (a
    redacted run directory), else ``[]``."""
    if is_bundle(path):
        return [Path(path)]
    try:
        return sorted(child for child in Path(path).iterdir() if is_bundle(child))
    except (OSError, ValueError):
        return []


def sniff(path: Path, head: bytes) -> bool:
    """A directory with a popprof manifest (or the manifest file itself)."""
    if path.is_dir():
        return is_bundle(path)
    return is_manifest(path) and BUNDLE_FORMAT.encode() in head


def open_member(bundle_dir: Path, name: str, what: str = "bundle member") -> BinaryIO:
    """Open the file ``name`` of a bundle: a regular file inside the bundle directory, never through a symlink.

    A name with a separator or ``..``, a symlink (the bundle came from someone else: it could point at any
    file of this machine) and a special file (a FIFO would block) are an InputError, checked on the open
    file itself (no race between the check and the read).
    """
    if not isinstance(name, str) or not name or Path(name).name != name or name in (".", ".."):
        raise InputError(
            Path(bundle_dir) / MANIFEST,
            f"{what} {name!r} is not a file inside the bundle",
            "export the bundle again",
        )
    path = Path(bundle_dir) / name
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(
            bundle_dir, f"bundle is missing {name} ({what})", "the bundle is incomplete; export it again"
        ) from None
    except OSError as exc:
        if os.path.islink(path):
            raise InputError(
                path,
                "is a symlink: a bundle is read only through regular files inside it",
                "export the bundle again; copy it with the files themselves (cp -rL)",
            ) from None
        raise InputError(path, f"cannot open ({exc.strerror or exc})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise InputError(
            path, "is not a regular file (a directory, FIFO or device in a bundle)", "export the bundle again"
        )
    return os.fdopen(fd, "rb")


def _manifest_bytes(path: Path) -> bytes:
    cap = limits.get("manifest-bytes")
    with open_member(path, MANIFEST, "manifest") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > cap:
            raise limits.LimitExceeded(
                path / MANIFEST, "manifest-bytes", f"a manifest of {units.nbytes(size)}"
            )
        data = handle.read(cap + 1)
    if len(data) > cap:
        raise limits.LimitExceeded(
            path / MANIFEST, "manifest-bytes", f"a manifest of more than {units.nbytes(cap)}"
        )
    return data


def read_manifest(path: Path) -> dict:
    """Load and validate a bundle's manifest (a regular file within ``manifest-bytes``)."""
    manifest_path = path / MANIFEST
    data = _manifest_bytes(path)
    try:
        manifest = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise InputError(
            manifest_path, f"unreadable bundle manifest ({' '.join(str(exc).split())[:200]})"
        ) from None
    check_format(manifest, manifest_path, tag=BUNDLE_FORMAT, what="bundle manifest", supported=FORMAT_VERSION)
    validate_manifest(manifest, manifest_path)
    return manifest


def written_by_popprof(path: Path) -> bool:
    """A bundle popprof wrote that holds nothing else: its manifest says so, and its directory holds only
    the manifest and the table files it lists (no notes, no subdirectories, no symlinks)."""
    try:
        manifest = read_manifest(path)
    except (InputError, OSError):
        return False
    if manifest.get("tool") != "popprof":
        return False
    listed = {MANIFEST} | {e.get("file", f"{n}.parquet") for n, e in manifest.get("tables", {}).items()}
    try:
        entries = list(os.scandir(path))
    except OSError:
        return False
    return all(e.name in listed and e.is_file(follow_symlinks=False) for e in entries)


def _in_bundle_set(path: Path) -> bool:
    try:
        return written_by_popprof(path) and read_manifest(path).get(BUNDLE_SET_KEY) is True
    except (InputError, OSError):
        return False


def replaceable(path: Path) -> bool:
    """Whether an output may replace the directory ``path``: a bundle popprof wrote that holds nothing
    else, or a directory that holds only such bundles written as one set (:data:`BUNDLE_SET_KEY`)."""
    if is_bundle(path):
        return written_by_popprof(path)
    try:
        entries = list(os.scandir(path))
    except OSError:
        return False
    return bool(entries) and all(
        e.is_dir(follow_symlinks=False) and _in_bundle_set(Path(e.path)) for e in entries
    )


def mark_bundle_set(tmp: Path) -> None:
    """Mark each bundle of a directory written as a set of bundles, so that a later run may replace it."""
    if is_bundle(tmp):
        return
    entries = list(tmp.iterdir())
    if not entries or not all(e.is_dir() and is_bundle(e) for e in entries):
        return
    for entry in entries:
        manifest_path = entry / MANIFEST
        manifest = json.loads(manifest_path.read_text("utf-8"))
        if isinstance(manifest, dict):
            manifest[BUNDLE_SET_KEY] = True
            manifest_path.write_text(json.dumps(manifest, indent=2) + "\n", "utf-8")


@contextlib.contextmanager
def output_directory(out: str | os.PathLike[str], example: str = "NAME.popprof") -> Iterator[Path]:
    """:func:`~popprof.io.atomic.atomic_path` for a bundle or a set of bundles at ``out``: an existing
    ``out`` is replaced only when :func:`replaceable` (or empty); a set of bundles is marked as one."""
    with atomic_path(
        out, directory=True, replaceable=replaceable, finish=mark_bundle_set, example=example
    ) as tmp:
        yield tmp


#: Manifest keys and the JSON types they must have when present (``format``/``format_version``: check_format).
MANIFEST_TYPES: dict[str, tuple[type, ...]] = {
    "tool": (str,),
    "tool_version": (str,),
    "created": (str,),
    "profile_name": (str,),
    "source_format": (str,),
    "sources": (list,),
    "redacted": (dict,),
    "tables": (dict,),
}


def validate_manifest(manifest: dict, where: Path) -> None:
    """InputError naming the first manifest field whose JSON type is wrong, or the missing list of tables (a
    tampered or hand-edited bundle)."""

    def bad(field: str, value: object, expected: str) -> InputError:
        return InputError(
            where,
            f"bundle manifest field {field} is {json_kind(value)}, expected {expected}",
            "export the bundle again",
        )

    if "tables" not in manifest:  # every bundle written lists its tables: without them it would read as empty
        raise InputError(where, "bundle manifest has no field 'tables'", "export the bundle again")
    for key, types in MANIFEST_TYPES.items():
        if key in manifest and not isinstance(manifest[key], types):
            raise bad(repr(key), manifest[key], JSON_KINDS[types[0]])
    for index, source in enumerate(manifest.get("sources", [])):
        if not isinstance(source, dict):
            raise bad(f"'sources'[{index}]", source, "an object")
    for name, entry in manifest.get("tables", {}).items():
        if not isinstance(entry, dict):
            raise bad(f"'tables'.{name!r}", entry, "an object")
        rows = entry.get("rows", 0)
        if not isinstance(rows, int) or isinstance(rows, bool) or rows < 0:
            raise bad(f"'tables'.{name!r}.'rows'", rows, "a non-negative integer")
        columns = entry.get("columns", [])
        if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
            raise bad(f"'tables'.{name!r}.'columns'", columns, "a list of strings")


def read(path: Path, **_options: object) -> Profile:
    """Read a bundle directory into a Profile."""
    if path.is_file():
        path = path.parent
    manifest = read_manifest(path)
    tables = {}
    listed = manifest.get("tables", {})
    for name, entry in listed.items():
        if name not in TABLES:
            continue  # a table from a newer minor version: skip rather than fail
        file_name = entry.get("file", f"{name}.parquet")
        tables[name] = _read_table(path, file_name, name, entry)
    _check_values(tables, path)
    profile = Profile(manifest.get("profile_name") or path.stem, tables, source=str(path))
    return profile


#: Largest figures of a real target (an IPU has 1,472 tiles, a pod thousands of IPUs, a tile under 1 MiB):
#: beyond them a bundle was tampered with (``tiles_per_ipu = 2^31 - 1`` made a tile map allocate 16 GiB).
#: Only the figures that size arrays (tile maps, per-tile tables) are bounded; other figures are kept as written.
TARGET_CAPS = {"tiles_per_ipu": 1 << 20, "num_tiles": 1 << 26}


class BundleValueWarning(UserWarning):
    """A bundle holds a value that cannot be right (read as missing)."""


def _check_values(tables: dict, path: Path) -> None:
    """Values a tampered bundle may hold that no reader writes: a metadata row without a key (dropped), a row
    repeating its table's key (all but the first dropped), a target figure that sizes arrays beyond
    :data:`TARGET_CAPS` (InputError). (A count of zero tiles is kept as written;
    :meth:`~popprof.model.profile.Profile.target_value` gives it as missing.)"""
    import warnings

    import pandas as pd

    meta = tables.get("metadata")
    if meta is not None and "key" in meta.columns:
        missing = meta["key"].isna()
        if missing.any():
            warnings.warn(
                f"{path}: {plural(int(missing.sum()), 'metadata row')} without a key, ignored",
                BundleValueWarning,
                stacklevel=2,
            )
            tables["metadata"] = meta[~missing].reset_index(drop=True)
    for name, frame in tables.items():  # a key written twice (no reader does): tile maps index by the key
        key = list(TABLES[name].key)
        if not key or frame is None or frame.empty or not set(key) <= set(frame.columns):
            continue
        repeated = frame.duplicated(subset=key, keep="first")
        if repeated.any():
            warnings.warn(
                f"{path}: {plural(int(repeated.sum()), 'row')} of table {name!r} repeating a "
                f"{', '.join(key)} already read, ignored",
                BundleValueWarning,
                stacklevel=2,
            )
            tables[name] = frame[~repeated].reset_index(drop=True)
    check_measures(tables, path, BundleValueWarning)
    target = tables.get("target")
    if target is None or target.empty:
        return
    for column, cap in TARGET_CAPS.items():
        if column not in target.columns:
            continue
        values = pd.to_numeric(target[column], errors="coerce")
        if (values > cap).any():
            raise InputError(
                path / MANIFEST,
                f"target {column} = {units.count(values.max())} is beyond any real target (at most {units.count(cap)})",
                "export the bundle again",
            )


@contextlib.contextmanager
def corrupt_parquet(file: Path, hint: str = "export the bundle again") -> Iterator[None]:
    """Arrow's error on a damaged table file (cut off, not Parquet, a page failing its checksum) as one
    InputError naming the file: the bundle reader's, and the redaction's and leak scan's on a bundle's files."""
    try:
        yield
    except (pa.ArrowException, OSError) as exc:
        detail = " ".join(str(exc).split())  # Arrow's Thrift messages span several lines
        raise InputError(file, f"corrupt Parquet file ({detail})", hint) from None


def _read_table(path: Path, file_name: object, name: str, entry: dict):
    """One table of a bundle, bounded before it is read: rows and memory from the Parquet footer."""
    import pyarrow.parquet as pq  # here: detection imports this module for every input

    with open_member(path, file_name, f"table {name!r} file") as handle:
        file = path / str(file_name)
        size = os.fstat(handle.fileno()).st_size
        try:
            with corrupt_parquet(file):
                # each data page's CRC-32 checked where the writer wrote one (popprof's since 2026-12-07): a
                # flipped byte is an error, not wrong values read silently (bundles written before carry none)
                parquet = pq.ParquetFile(handle, page_checksum_verification=True)
                rows = parquet.metadata.num_rows
                _check_footer(file, parquet, rows, size, entry)
                frame = parquet.read().to_pandas()
        except MemoryError:
            raise limits.LimitExceeded(file, "parquet-ratio", "a table that does not fit in memory") from None
    if len(frame) != entry.get("rows", len(frame)):
        raise InputError(file, f"has {len(frame)} rows, manifest says {entry.get('rows')}")
    return frame


def _check_footer(file: Path, parquet, rows: int, size: int, entry: dict) -> None:
    """LimitExceeded/InputError from the footer alone: too many rows, a table far larger in memory than on
    disk (a row bomb: millions of zero rows compress to nothing), or other rows than the manifest says."""
    if rows > limits.get("table-rows"):
        raise limits.LimitExceeded(file, "table-rows", f"a table of {units.count(rows)} rows")
    if rows != entry.get("rows", rows):
        raise InputError(
            file, f"has {rows} rows, manifest says {entry.get('rows')}", "export the bundle again"
        )
    metadata = parquet.metadata
    variable = sum(
        metadata.row_group(g).column(c).total_uncompressed_size
        for g in range(metadata.num_row_groups)
        for c in range(metadata.num_columns)
    )
    width = 0
    for column in parquet.schema_arrow:
        try:
            width += column.type.bit_width // 8
        except ValueError:  # variable width: a pointer per value, the bytes counted from the footer
            width += _WIDTH_OF_VARIABLE
    expanded = rows * max(width, 1) + variable
    ratio = limits.get("parquet-ratio")
    if expanded > limits.PARQUET_RATIO_FLOOR and expanded > ratio * max(size, 1):
        raise limits.LimitExceeded(
            file,
            "parquet-ratio",
            f"a table that expands {units.count(expanded // max(size, 1))}x in memory ({units.count(rows)} rows, "
            f"about {units.nbytes(expanded)} from {units.nbytes(size)}; a row bomb?)",
        )


def write(
    profile: Profile,
    out: str | os.PathLike[str],
    *,
    redaction: dict | None = None,
    sources: list[dict] | None = None,
    protect: list[str | os.PathLike[str]] = (),
    name: str | None = None,
) -> Path:
    """Write ``profile`` as a bundle at ``out`` (atomically). Returns the bundle path.

    ``redaction`` records how the bundle was redacted (policy, tool version; never a key).
    ``protect`` lists input paths the output must not be, nor be inside. ``name`` (default the
    profile's) is what a refusal to replace a directory suggests writing inside it.
    """
    out = Path(out)
    refuse_overwriting_inputs(out, [profile.source, *protect])
    meta = profile.meta
    if sources is None:
        try:
            sources = json.loads(meta.get("source_files", "[]"))
        except json.JSONDecodeError:
            sources = []
    manifest: dict = {
        "format": BUNDLE_FORMAT,
        "format_version": FORMAT_VERSION,
        "tool": "popprof",
        "tool_version": __version__,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "profile_name": profile.name,
        "source_format": profile.source_format,
        "sources": sources,
        "redacted": redaction or {"redacted": False},
        "tables": {},
    }
    import pyarrow.parquet as pq

    with output_directory(out, f"{name or profile.name}.popprof") as tmp:
        for table_name, frame in profile.tables.items():
            file = f"{table_name}.parquet"
            table = pa.Table.from_pandas(frame, preserve_index=False)
            pq.write_table(table, tmp / file, compression="zstd", write_page_checksum=True)
            manifest["tables"][table_name] = {
                "file": file,
                "rows": len(frame),
                "columns": list(map(str, frame.columns)),
            }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", "utf-8")
    return out
