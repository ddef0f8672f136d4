"""Write outputs atomically: to a temporary name beside the target, renamed when complete."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .errors import OutputError


#: errno values of a failed write that concern the output, whatever file name the error carries.
_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str], *, directory: bool = False,
                replaceable: Callable[[Path], bool] | None = None) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; move it onto ``target`` on success.

    With ``directory=True`` the temporary path is an empty directory. On any
    exception the temporary path is removed and ``target`` is left untouched.
    An existing ``target`` is replaced only once the new one is complete.
    When the output cannot be written (no permission, a file where a directory
    is needed, disk full) an :class:`~popprof.errors.OutputError` names
    ``target``, not the temporary file.

    With ``directory=True`` an existing ``target`` is replaced only when it is
    an empty directory or one that ``replaceable`` accepts (default: it holds a
    ``manifest.json``, or only bundles, i.e. it is an earlier output):
    ``-o some/existing/dir`` must never delete whatever else that directory
    holds. This is checked before anything is written.
    """
    target = Path(target)
    parent = target.parent if str(target.parent) else Path(".")
    if directory:
        _check_replaceable(target, replaceable or _is_bundle_dir)
    try:
        parent.mkdir(parents=True, exist_ok=True)
        if directory:
            tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent))
        else:
            fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
            os.close(fd)
            tmp = Path(name)
    except OSError as exc:
        raise _output_error(target, exc) from None
    try:
        yield tmp
        try:
            _move_into_place(tmp, target, parent, directory)
        except OSError as exc:
            raise _output_error(target, exc) from None
    except OSError as exc:
        _remove(tmp)
        if _concerns_output(exc, tmp):
            raise _output_error(target, exc) from None
        raise
    except BaseException:
        _remove(tmp)
        raise


def _is_bundle_dir(path: Path) -> bool:
    """A bundle (it holds a manifest.json) or a directory of bundles only (one per engine)."""
    if (path / "manifest.json").is_file():
        return True
    entries = list(path.iterdir())
    return bool(entries) and all(e.is_dir() and (e / "manifest.json").is_file() for e in entries)


def _check_replaceable(target: Path, replaceable: Callable[[Path], bool]) -> None:
    from .errors import OutputError

    if not (target.exists() or target.is_symlink()):
        return
    if target.is_dir() and not target.is_symlink():
        if replaceable(target) or not any(target.iterdir()):
            return
        raise OutputError(target, "an existing directory that is not a bundle: replacing it would delete what "
                                  "it holds")
    raise OutputError(target, "an existing file, where a directory would go")


def _move_into_place(tmp: Path, target: Path, parent: Path, directory: bool) -> None:
    if directory:
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; a bundle is meant to be shared
        if target.exists():
            backup = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=parent))
            backup.rmdir()
            os.replace(target, backup)
            os.replace(tmp, target)
            _remove(backup)
        else:
            os.replace(tmp, target)
    else:
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)


def _concerns_output(exc: OSError, tmp: Path) -> bool:
    """True when an error raised while writing ``tmp`` is about the output, not about reading an input."""
    if exc.errno in _OUTPUT_ERRNOS:
        return True
    names = [str(n) for n in (exc.filename, exc.filename2) if n is not None]
    return any(n == str(tmp) or n.startswith(str(tmp) + os.sep) for n in names)


def _output_error(target: Path, exc: OSError) -> OutputError:
    from .errors import OutputError

    if isinstance(exc, FileExistsError | NotADirectoryError) and not target.parent.is_dir():
        problem = f"{_first_file_ancestor(target)} is a file, not a directory"
    elif isinstance(exc, IsADirectoryError) or (target.is_dir() and not target.is_symlink()
                                                 and exc.errno in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST)):
        problem = "it is a directory"
    else:
        problem = exc.strerror or str(exc)
    return OutputError(target, problem)


def _first_file_ancestor(target: Path) -> Path:
    for ancestor in reversed(target.parents):
        if ancestor.exists() and not ancestor.is_dir():
            return ancestor
    return target.parent


def write_bytes_atomic(target: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``target`` atomically."""
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(target: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``target`` atomically."""
    write_bytes_atomic(target, text.encode("utf-8"))


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def refuse_overwriting_inputs(out: str | os.PathLike[str], inputs: list) -> None:
    """Raise UsageError when ``out`` is one of ``inputs``, sits inside one, or contains one.

    Inputs are never modified: every command that writes calls this before writing.
    Empty entries and inputs that do not exist on disk are ignored.
    """
    from .errors import UsageError

    target = Path(out).resolve()
    for item in inputs:
        if not item or not Path(item).exists():
            continue
        source = Path(item).resolve()
        if target == source or source in target.parents or target in source.parents:
            raise UsageError(f"{out}: output would overwrite the input {item} (or sit inside it, or contain "
                             "it); choose another path")
