"""Readers: the only code that knows file formats. Detection by content, then extension.

Each reader module defines:

- ``FORMAT``: its name (``"bundle"``, ``"pop"``, ...), recorded as ``target.source_format``;
- ``sniff(path: Path, head: bytes) -> bool``: whether the file (or directory) is its
  format; ``head`` is the first bytes of the file, gunzipped when the file is gzip;
- ``read(path: Path, **options) -> Profile``: read it, raising
  :class:`~popprof.model.errors.InputError` with a clear message when it is not what it
  expects. Options a reader does not know are ignored.
"""

from __future__ import annotations

import importlib
import stat
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from ..io import bounded
from ..io.files import gzip_truncated, read_head
from ..model.errors import InputError

if TYPE_CHECKING:  # the profile (pandas) is imported by the readers that make one, not by detection
    from ..model.profile import Profile

#: Reader modules in detection order (most specific first).
READER_MODULES: tuple[str, ...] = (
    "bundle",
    "pop",
    "pvti",
    "baseline",
    "sdk1_json",
    "chrome",
    "text_summary",
    "oom_log",
    "archive",
)

#: Readers that classify device activity themselves (``device_map`` option); other readers' events
#: (a bundle of a trace) are re-classified after reading.
MAP_WHILE_READING: frozenset[str] = frozenset({"chrome_trace", "pvti"})


def reader_modules() -> Iterator[ModuleType]:
    """The reader modules that exist in this installation, in detection order, each imported only when
    reached (a trace is claimed before the text readers, whose patterns take a while to compile)."""
    for name in READER_MODULES:
        full = f"{__name__}.{name}"
        try:
            module = importlib.import_module(full)
        except ModuleNotFoundError as exc:
            if exc.name != full:
                raise
            continue
        yield module


def detect(path: Path) -> ModuleType:
    """Pick the reader for ``path`` by content; raise InputError when none fits."""
    info = bounded.check_input_file(path)
    head = b""
    if stat.S_ISREG(info.st_mode):
        if info.st_size == 0:
            raise InputError(path, "the file is empty")
        head = read_head(path)
    for module in reader_modules():
        if module.sniff(path, head):
            return module
    from .textload import release

    release()  # a text reader may have kept the file's text while sniffing
    if path.is_dir():
        raise InputError(
            path, "directory holds no profile (no profile.pop, *.pvti, bundle manifest or trace)"
        )
    if gzip_truncated(path):
        raise InputError(
            path,
            "gzip data is truncated and what it holds is not a recognised profile",
            "re-copy the file; it was cut off",
        )
    raise InputError(
        path,
        "not a recognised profile format",
        "expected profile.pop, .pvti, a popprof bundle, a Poplar text summary, "
        "SDK 1.x JSON, Chrome trace JSON or a log with a Poplar out-of-memory message",
    )


def _run_directory_entries(path: Path) -> list[tuple[str, Path]]:
    """Engines, bundles and traces of a run directory (``autoReport.directory`` / ``PVTI_OPTIONS.directory``)."""
    from . import rundir

    return [(entry.name, entry.path) for entry in rundir.entries(path)]


def _is_bundle_dir(path: Path) -> bool:
    from .bundle import is_bundle

    return is_bundle(path)


class SkippedInputWarning(UserWarning):
    """A file of a directory that could not be read; the directory's other inputs were."""


def open_all(path: str | Path, *, config: dict | None = None, **options: object) -> dict[str, Profile]:
    """Open a file, a bundle, or a run directory: one Profile per engine (and per trace), by name.

    ``device_map`` (a mapping, JSON text or a JSON file) says which trace events are device activity;
    ``config`` (the ``[tool.popprof]`` table, see :func:`popprof.config.load_config`) supplies its
    ``device_map`` when none is given, as every command does.
    """
    path = Path(path)
    if options.get("device_map") is None and config and config.get("device_map"):
        options["device_map"] = config["device_map"]
    try:
        run_directory = path.is_dir() and not _is_bundle_dir(path)
    except OSError as exc:  # e.g. a name too long for the file system
        raise InputError(path, f"cannot access: {exc.strerror or exc}") from None
    if run_directory:
        from . import rank_dir

        if rank_dir.is_rank_directory(path):  # a directory of per-rank Chrome traces: one profile, every rank
            profile = rank_dir.read(path, **options)
            return {profile.name: profile}
        try:
            entries = _run_directory_entries(path)
        except OSError as exc:
            raise InputError(path, f"cannot list the directory: {exc.strerror or exc}") from None
        loose = not entries
        if loose:  # a directory of loose inputs (text summaries, logs, traces): every readable file
            entries = [
                (p.stem, p) for p in sorted(path.iterdir()) if p.is_file() and not p.name.startswith(".")
            ]
        profiles: dict[str, Profile] = {}
        skipped: list[str] = []
        for name, entry in entries:
            try:
                found = read_file_all(entry, **options) if loose else {name: read_path(entry, **options)}
            except InputError as exc:  # one unreadable input is reported and skipped, not the whole directory
                skipped.append(str(exc))
                continue
            for key, profile in found.items():
                key = key if loose else name
                profile.name = key if key not in profiles else f"{key}-{len(profiles)}"
                profiles[profile.name] = profile
        if not profiles:
            detail = f"; {len(skipped)} unreadable: {skipped[0]}" if skipped else ""
            raise InputError(
                path,
                "directory holds no profile (no profile.pop, *.pvti, bundle manifest, Chrome trace "
                f"*.json / *.json.gz or other readable input){detail}",
            )
        for problem in skipped:
            warnings.warn(f"skipped: {problem}", SkippedInputWarning, stacklevel=2)
        return profiles
    return read_file_all(path, **options)


def read_file_all(path: Path, **options: object) -> dict[str, Profile]:
    """Every profile one file holds, by name: a reader with ``read_all`` (a log of several text
    summaries) may give several; others give one."""
    module = _detect_readable(path)
    if not hasattr(module, "read_all"):
        profile = read_with(module, path, **options)
        return {profile.name: profile}
    profiles = _guarded(path, module, lambda: module.read_all(path, **options))
    return {name: _with_device_map(module, p, options) for name, p in profiles.items()}


def _with_device_map(module: ModuleType, profile: Profile, options: dict) -> Profile:
    """Re-classify the events of a reader that does not apply ``device_map`` itself (e.g. a bundle of a trace)."""
    if options.get("device_map") is not None and getattr(module, "FORMAT", "") not in MAP_WHILE_READING:
        from ..trace.device import apply_device_map

        apply_device_map(profile, options["device_map"])
    return profile


def _detect_readable(path: Path) -> ModuleType:
    try:
        return detect(path)
    except OSError as exc:  # unreadable (permissions, I/O error): bad input, not an internal error
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None


def _guarded(path: Path, module: ModuleType, call):  # noqa: ANN001, ANN202
    """Run a reader call, turning what it trips over into one InputError naming the file.

    A regular file that changes while it is read (size, modification time or inode before and after)
    is refused with one line, whatever the reader made of the mixed bytes.
    """
    from ..io.files import check_unchanged, snapshot

    before = snapshot(path)
    try:
        result = call()
        check_unchanged(path, before)
        return result
    except (InputError, KeyboardInterrupt, MemoryError):
        check_unchanged(path, before)
        raise
    except OSError as exc:
        check_unchanged(path, before)
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    except Exception as exc:  # a reader tripping over malformed content is bad input, not a crash
        check_unchanged(path, before)
        fmt = getattr(module, "FORMAT", module.__name__)
        raise InputError(
            path,
            f"malformed {fmt} input ({type(exc).__name__}: {exc})",
            "the file may be truncated or corrupt",
        ) from exc


def read_path(path: Path, **options: object) -> Profile:
    """Read one file or bundle with the reader its content selects."""
    return read_with(_detect_readable(path), path, **options)


def read_with(module: ModuleType, path: Path, **options: object) -> Profile:
    """Read ``path`` with the reader ``module`` (detected already), applying a given device map; anything
    the reader trips over becomes one InputError naming the file."""
    return _guarded(path, module, lambda: _with_device_map(module, module.read(path, **options), options))


def open_profile(path: str | Path, engine: str | None = None, **options: object) -> Profile:
    """Open one Profile. For a run directory with several engines, ``engine`` picks one.

    Options go to the readers (``with_args``, ``device_map``, ``config``: see :func:`open_all`).
    """
    profiles = open_all(path, **options)
    if engine is not None:
        if engine not in profiles:
            raise InputError(path, f"no engine {engine!r}; found: {', '.join(profiles)}")
        return profiles[engine]
    if len(profiles) == 1:
        return next(iter(profiles.values()))
    raise InputError(
        path,
        f"holds several profiles ({', '.join(profiles)})",
        "pick one with engine=NAME (CLI: --engine NAME), or use popprof.open_all",
    )
