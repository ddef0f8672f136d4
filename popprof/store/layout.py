"""Where things live in a run store, and the one place that touches its files (local or ``s3://``).

::

    STORE/popprof-store.json                         format tag and version
    STORE/runs/month=YYYY-MM/<key>--<ingest>.parquet  the catalogue: one row per ingest of (run_id, profile)
    STORE/pending/<ingest>.json                       an add under way (``store fsck --fix`` leaves its files)
    STORE/metrics/month=YYYY-MM/<key>--<ingest>.parquet
    STORE/ranks/month=YYYY-MM/<key>--<ingest>.parquet
    STORE/tables/<table>/month=YYYY-MM/<key>--<ingest>.parquet
    STORE/<kind>/month=YYYY-MM/compact-<generation>-<hash>.parquet   after ``store compact``
    STORE/acks/<metric>.json                          acknowledged change points
    STORE/cache/runs.parquet                          the catalogue rows popprof read (:mod:`.catalogue_cache`)
    STORE/cache/verified.parquet                      the files whose page checksums a read checked (:mod:`.verified`)

Run ids are columns inside the files, never directory names (Spark would read ``run_id=00123`` as 123.0);
the only partition key is the month of the run's own time, a bounded string every engine keeps as a string.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..io.atomic import atomic_path
from ..model.errors import InputError, UsageError

STORE_FILE = "popprof-store.json"
STORE_FORMAT = "popprof-store"
#: The store layout version this popprof writes and reads; a newer store is refused.
STORE_VERSION = 1

#: The derived tables popprof writes at ingest (each a directory of month partitions).
DERIVED = ("runs", "metrics", "ranks")
COMPACT_PREFIX = "compact-"
_COMPACT = re.compile(r"compact-(\d+)-[0-9a-f]+\.parquet$")
_MONTH = re.compile(r"^\d{4}-\d{2}$")


def slug(text: str, width: int = 40) -> str:
    """A file-name-safe, readable form of ``text`` (no engine reads meaning from it)."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "x"
    return cleaned[:width]


def run_key(run_id: str, profile: str) -> str:
    """The file stem of a run: readable slugs plus a hash of the exact pair, so distinct pairs never collide."""
    digest = hashlib.sha1(f"{run_id}\0{profile}".encode()).hexdigest()[:8]
    return f"{slug(run_id)}--{slug(profile)}--{digest}"


def kind_dir(kind: str) -> str:
    """The directory of a kind: ``runs``, ``metrics``, ``ranks``, ``findings``, ``account`` or ``tables/<table>``
    (a kind is its path)."""
    return kind


def month_dir(kind: str, month: str) -> str:
    """The partition directory of ``kind`` for ``month`` (YYYY-MM)."""
    return f"{kind_dir(kind)}/month={month}"


def run_file(kind: str, month: str, key: str, ingest_id: str) -> str:
    """The store-relative path of one run's file of ``kind``. The catalogue row's name holds the ingest id too
    (stores of popprof 0.x before issue 45 named it ``<key>.parquet``, still read): two adds of one run with
    other content at once then write two rows, and each sees the other's, instead of one rename silently
    replacing the other's row."""
    return f"{month_dir(kind, month)}/{key}--{ingest_id}.parquet"


#: Where an add under way says so: ``pending/<ingest>.json``, written before its first file and removed
#: after its catalogue row; ``store fsck --fix`` leaves the files of such an ingest alone.
PENDING = "pending"


def compact_generation(name: str) -> int:
    """0 for a per-run file, else the generation number in a ``compact-<gen>-<hash>.parquet`` name."""
    found = _COMPACT.search(name)
    return int(found.group(1)) if found else 0


def ingest_of(name: str) -> str | None:
    """The ingest id in a per-run file name (None for a catalogue file or a compacted one)."""
    stem = PurePosixPath(name).name.removesuffix(".parquet")
    parts = stem.split("--")
    return parts[3] if len(parts) == 4 else None


def is_month(text: str) -> bool:
    """Whether ``text`` is a partition month (YYYY-MM)."""
    return bool(_MONTH.match(text))


def check_month(month: str) -> str:
    """``month`` when it is YYYY-MM, else UsageError."""
    if not _MONTH.match(month):
        raise UsageError(f"month {month!r} is not YYYY-MM")
    return month


@dataclass
class Location:
    """A store root: a local directory or an fsspec URL (``s3://bucket/prefix``), with the few file operations
    the store needs. Local writes go through :func:`popprof.atomic.atomic_path`; object-store PUTs are atomic
    per object already."""

    root: str
    fs: object | None = None  # an fsspec filesystem for remote stores, None for a local directory
    #: store-relative paths :meth:`files` left out because they are (or lie under) a symbolic link
    skipped: set[str] = field(default_factory=set, repr=False, compare=False)

    @classmethod
    def of(cls, store: str | Path) -> Location:
        """The location of ``store`` (a path or ``s3://...``); s3 needs the ``s3`` extra."""
        text = str(store)
        if "://" not in text:
            return cls(str(Path(text).resolve()))
        scheme, rest = text.split("://", 1)
        authority, slash, path = rest.partition("/")
        if "@" in authority:  # s3://KEY:SECRET@bucket/prefix: never echo what precedes the @
            raise UsageError(
                f"{scheme}://***@{authority.rsplit('@', 1)[1]}{slash}{path}: a store URL must not hold "
                "credentials (they would show in logs and messages); give them in the environment "
                "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) or an AWS profile"
            )
        try:
            import fsspec

            fs = fsspec.filesystem(scheme)
        except ImportError:
            raise UsageError(
                f"{text}: a {scheme}:// store needs fsspec and s3fs; pip install 'popprof[s3]'"
            ) from None
        except ValueError as exc:
            raise UsageError(f"{text}: no file system for {scheme}:// ({exc})") from None
        return cls(text.rstrip("/"), fs)

    @property
    def local(self) -> bool:
        return self.fs is None

    def path(self, rel: str) -> str:
        """The full path (or URL) of a store-relative path."""
        return f"{self.root}/{rel}" if rel else self.root

    def _bare(self, rel: str) -> str:
        """The path an fsspec filesystem takes (no scheme)."""
        return self.fs._strip_protocol(self.path(rel))  # type: ignore[union-attr]

    def exists(self, rel: str) -> bool:
        """Whether a file exists at ``rel``."""
        if self.local:
            return Path(self.path(rel)).exists()
        return bool(self.fs.exists(self._bare(rel)))  # type: ignore[union-attr]

    def read_bytes(self, rel: str) -> bytes:
        """The bytes of the file at ``rel``."""
        if self.local:
            return Path(self.path(rel)).read_bytes()
        with self.fs.open(self._bare(rel), "rb") as handle:  # type: ignore[union-attr]
            return handle.read()

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Write ``data`` at ``rel``: to a temporary name and renamed locally, one PUT on an object store."""
        if self.local:
            with atomic_path(self.path(rel)) as tmp:
                tmp.write_bytes(data)
            return
        with self.fs.open(self._bare(rel), "wb") as handle:  # type: ignore[union-attr]
            handle.write(data)

    @contextlib.contextmanager
    def writing(self, rel: str) -> Iterator[object]:
        """A path (local) or an open binary file (remote) to write ``rel`` to; in place only when complete."""
        if self.local:
            with atomic_path(self.path(rel)) as tmp:
                yield str(tmp)
            return
        with self.fs.open(self._bare(rel), "wb") as handle:  # type: ignore[union-attr]
            yield handle

    def remove(self, rel: str) -> None:
        """Remove the file at ``rel`` (absent is fine)."""
        if self.local:
            Path(self.path(rel)).unlink(missing_ok=True)
            return
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm(self._bare(rel))  # type: ignore[union-attr]

    def files(self, rel: str, pattern: str = "**") -> list[str]:
        """Store-relative paths of the files under ``rel`` matching ``pattern`` (sorted)."""
        if self.local:
            base = Path(self.root)
            top = base / rel
            if not top.is_dir():
                return []
            real = os.path.realpath(self.root)
            found = []
            for p in top.glob(pattern):
                name = p.relative_to(base).as_posix()
                # a symbolic link (or a file under a linked directory) is not the store's: never read,
                # compacted or removed through it; ``store fsck`` reports it (:meth:`links`)
                if os.path.realpath(p) != os.path.join(real, *name.split("/")):
                    self.skipped.add(name)
                elif p.is_file():
                    found.append(name)
            return sorted(found)
        found = self.fs.glob(self._bare(f"{rel}/{pattern}"))  # type: ignore[union-attr]
        prefix = self._bare("") + "/"
        return sorted(f[len(prefix) :] for f in found if not self.fs.isdir(f))  # type: ignore[union-attr]

    def links(self) -> list[str]:
        """Store-relative paths of the symbolic links in a local store (none on an object store)."""
        if not self.local:
            return []
        found = []
        for top, dirs, files in os.walk(self.root):
            for name in (*dirs, *files):
                path = os.path.join(top, name)
                if os.path.islink(path):
                    found.append(os.path.relpath(path, self.root).replace(os.sep, "/"))
        return sorted(found)

    def dirs(self, rel: str) -> list[str]:
        """Names of the directories directly under ``rel``."""
        if self.local:
            top = Path(self.root) / rel
            return sorted(p.name for p in top.iterdir() if p.is_dir()) if top.is_dir() else []
        try:
            entries = self.fs.ls(self._bare(rel), detail=True)  # type: ignore[union-attr]
        except FileNotFoundError:
            return []
        return sorted(PurePosixPath(e["name"]).name for e in entries if e.get("type") == "directory")


def write_descriptor(location: Location, tool_version: str, created: str) -> None:
    """Write ``popprof-store.json`` (the store's format tag and layout version)."""
    document = {
        "format": STORE_FORMAT,
        "format_version": STORE_VERSION,
        "created": created,
        "tool_version": tool_version,
    }
    location.write_bytes(STORE_FILE, (json.dumps(document, indent=2) + "\n").encode())


def reach(location: Location) -> None:
    """The first request to an object store, where missing credentials and an unreachable endpoint show: one
    InputError line (exit 2) instead of an internal error. Nothing for a local store."""
    if location.local:
        return
    try:
        location.exists(STORE_FILE)
    except Exception as exc:  # botocore's and aiohttp's errors have no common base worth naming
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise InputError(
            location.root,
            f"cannot reach the store ({type(exc).__name__}: {reason})",
            "check the credentials (AWS_ACCESS_KEY_ID, AWS_PROFILE) and AWS_ENDPOINT_URL",
        ) from None


def read_descriptor(location: Location) -> dict:
    """The store's descriptor after checking it: InputError when missing, unreadable or from a newer popprof."""
    from ..io.versioning import check_format

    where = location.path(STORE_FILE)
    reach(location)
    if not location.exists(STORE_FILE):
        raise InputError(
            location.root, "not a popprof store (no popprof-store.json)", "create one: popprof store init"
        )
    try:
        document = json.loads(location.read_bytes(STORE_FILE))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(where, f"unreadable store descriptor ({exc})") from None
    check_format(document, where, tag=STORE_FORMAT, what="store", supported=STORE_VERSION)
    return document
