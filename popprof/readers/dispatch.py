"""Reading one input with the reader its content selects: every failure of a reader becomes one
:class:`~popprof.model.errors.InputError` naming the file, a file changed while read is refused, and a
device map is applied to the events of readers that do not apply it while reading."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from ..model.errors import InputError
from .registry import MAP_WHILE_READING, detect

if TYPE_CHECKING:  # the profile (pandas) is imported by the readers that make one
    from ..model.profile import Profile


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
