"""The popprof bundle: a directory with ``manifest.json`` and one Parquet file per table.

The bundle is what leaves the IPU machine: it needs no Poplar SDK, is small,
and is read by anything that reads Parquet (DuckDB, Spark, pandas). Reading a
bundle gives back exactly the tables written (columns, dtypes, values).
See ``docs/bundle.md`` for the manifest format.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path

import pyarrow as pa

from .._version import __version__
from ..io.atomic import atomic_path, refuse_overwriting_inputs
from ..io.versioning import check_format
from ..model.errors import InputError
from ..model.profile import Profile
from ..model.schema import TABLES

FORMAT = "bundle"
MANIFEST = "manifest.json"
BUNDLE_FORMAT = "popprof-bundle"
FORMAT_VERSION = 1


def sniff(path: Path, head: bytes) -> bool:
    """A directory with a popprof manifest (or the manifest file itself)."""
    if path.is_dir():
        return (path / MANIFEST).is_file()
    return path.name == MANIFEST and BUNDLE_FORMAT.encode() in head


def read_manifest(path: Path) -> dict:
    """Load and validate a bundle's manifest."""
    manifest_path = path / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(manifest_path, f"unreadable bundle manifest ({exc})") from None
    check_format(manifest, manifest_path, tag=BUNDLE_FORMAT, what="bundle manifest", supported=FORMAT_VERSION)
    validate_manifest(manifest, manifest_path)
    return manifest


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
JSON_TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    list: "a list",
    dict: "an object",
    bool: "true/false",
    float: "a number",
    type(None): "null",
}


def _kind(value: object) -> str:
    return JSON_TYPE_NAMES.get(type(value), type(value).__name__)


def validate_manifest(manifest: dict, where: Path) -> None:
    """InputError naming the first manifest field whose JSON type is wrong (a tampered or hand-edited bundle)."""

    def bad(field: str, value: object, expected: str) -> InputError:
        return InputError(
            where,
            f"bundle manifest field {field} is {_kind(value)}, expected {expected}",
            "export the bundle again",
        )

    for key, types in MANIFEST_TYPES.items():
        if key in manifest and not isinstance(manifest[key], types):
            raise bad(repr(key), manifest[key], JSON_TYPE_NAMES[types[0]])
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
        if (
            not isinstance(file_name, str)
            or not file_name
            or Path(file_name).name != file_name
            or file_name in (".", "..")
        ):
            # a bundle is shared: never let its manifest point at files outside it
            raise InputError(
                path / MANIFEST,
                f"table {name!r} names file {file_name!r}, which is not a file inside the bundle",
                "export the bundle again",
            )
        file = path / file_name
        if not file.is_file():
            raise InputError(
                path,
                f"bundle is missing {file.name} (table {name!r})",
                "the bundle is incomplete; export it again",
            )
        import pyarrow.parquet as pq  # here: detection imports this module for every input

        try:
            frame = pq.read_table(file).to_pandas()
        except (pa.ArrowException, OSError) as exc:
            detail = " ".join(str(exc).split())  # Arrow's Thrift messages span several lines
            raise InputError(file, f"corrupt Parquet file ({detail})", "export the bundle again") from None
        if len(frame) != entry.get("rows", len(frame)):
            raise InputError(file, f"has {len(frame)} rows, manifest says {entry.get('rows')}")
        tables[name] = frame
    profile = Profile(manifest.get("profile_name") or path.stem, tables, source=str(path))
    return profile


def write(
    profile: Profile,
    out: str | os.PathLike[str],
    *,
    redaction: dict | None = None,
    sources: list[dict] | None = None,
    protect: list[str | os.PathLike[str]] = (),
) -> Path:
    """Write ``profile`` as a bundle at ``out`` (atomically). Returns the bundle path.

    ``redaction`` records how the bundle was redacted (policy, tool version; never a key).
    ``protect`` lists input paths the output must not be, nor be inside.
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

    with atomic_path(out, directory=True) as tmp:
        for name, frame in profile.tables.items():
            file = f"{name}.parquet"
            table = pa.Table.from_pandas(frame, preserve_index=False)
            pq.write_table(table, tmp / file, compression="zstd")
            manifest["tables"][name] = {
                "file": file,
                "rows": len(frame),
                "columns": list(map(str, frame.columns)),
            }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", "utf-8")
    return out
