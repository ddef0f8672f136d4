"""Write outputs atomically: to a temporary name beside the target, renamed when complete."""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..model.errors import OutputError


#: errno values of a failed write that concern the output, whatever file name the error carries.
_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


#: Temporary paths of the atomic writes under way in this process -> the output the user asked for.
_ACTIVE: dict[Path, Path] = {}


@contextlib.contextmanager
def atomic_path(
    target: str | os.PathLike[str],
    *,
    directory: bool = False,
    replaceable: Callable[[Path], bool] | None = None,
    finish: Callable[[Path], None] | None = None,
    example: str = "NAME.popprof",
    mode: int | None = None,
) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; move it onto ``target`` on success.

    With ``directory=True`` the temporary path is an empty directory. On any
    exception (also SIGINT, and SIGTERM in the CLI) the temporary path is
    removed and ``target`` is left untouched. An existing ``target`` is replaced
    only once the new one is complete. When the output cannot be written (no
    permission, a file where a directory is needed, disk full) an
    :class:`~popprof.model.errors.OutputError` names the output the user asked for,
    never a temporary path. Temporaries left by an earlier run that was killed
    (its process is gone) are removed first.

    One rule for every directory output (``directory=True``): an existing
    ``target`` is replaced only when it is empty or ``replaceable`` accepts it
    (the bundle module's test: a bundle popprof wrote that holds nothing else, or
    a set of those), never a directory of other files. This is checked before
    anything is written (the refusal suggests ``-o TARGET/example``). ``finish(tmp)``
    runs on the complete temporary directory just before it is moved into place.

    Outputs get the modes the user's umask gives (``0666``/``0777`` less the
    umask); a regular file that is replaced keeps its own mode.

    A file output onto something that is not a regular file is never replaced:
    ``-`` (and ``/dev/stdout``, or any path that is the same file as standard
    output) means standard output, a FIFO, a terminal or ``/dev/null`` receive
    the bytes once they are complete; any other special file is refused.
    """
    target = Path(target)
    stream = _stream_destination(target, directory)
    if stream is not None:
        with _streamed(target, stream) as tmp:
            yield tmp
        return
    parent = target.parent if str(target.parent) else Path(".")
    if directory:
        _check_replaceable(target, replaceable or _never, example)
    try:
        parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(target)
        prefix = f".{target.name}.{os.getpid()}."
        if directory:
            tmp = Path(tempfile.mkdtemp(prefix=prefix, suffix=".tmp", dir=parent))
        else:
            fd, name = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=parent)
            os.close(fd)
            tmp = Path(name)
    except OSError as exc:
        raise _output_error(target, exc) from None
    _ACTIVE[tmp] = target
    try:
        yield tmp
        try:
            if finish is not None:
                finish(tmp)
            _move_into_place(tmp, target, parent, directory, mode)
        except OSError as exc:
            raise _output_error(target, exc) from None
    except OSError as exc:
        _remove(tmp)
        if _concerns_output(exc, tmp):
            raise _output_error(target, exc) from None
        raise
    except BaseException as exc:
        _remove(tmp)
        if isinstance(exc, Exception) and not isinstance(exc, _popprof_errors()) and str(tmp) in str(exc):
            raise _output_error(target, exc) from None  # e.g. Arrow naming the temporary file
        raise
    finally:
        _ACTIVE.pop(tmp, None)


def _popprof_errors() -> type:
    from ..model.errors import PopprofError

    return PopprofError


def user_path(path: Path) -> Path:
    """``path`` as the user knows it: a path inside a temporary of an atomic write is named inside its target."""
    for tmp, target in list(_ACTIVE.items()):
        if path == tmp:
            return user_path(target)
        if tmp in path.parents:
            return user_path(target / path.relative_to(tmp))
    return path


def remove_stale_temporaries(target: Path) -> list[Path]:
    """Remove ``.NAME.PID.*.tmp`` / ``.old`` left beside ``target`` by a popprof process that no longer runs."""
    parent = target.parent if str(target.parent) else Path(".")
    removed = []
    for candidate in parent.glob(glob.escape(f".{target.name}.") + "*"):
        match = _TEMPORARY.fullmatch(candidate.name[len(target.name) + 2 :])
        if match is None or _alive(int(match.group(1))):
            continue
        _remove(candidate)
        removed.append(candidate)
    return removed


_TEMPORARY = re.compile(r"(\d+)\.[A-Za-z0-9_]+\.(?:tmp|old)")


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True  # our own (an enclosing write of this run)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def _never(path: Path) -> bool:
    return False


def _check_replaceable(target: Path, replaceable: Callable[[Path], bool], example: str) -> None:
    from ..model.errors import OutputError

    if not (target.exists() or target.is_symlink()):
        return
    if target.is_dir() and not target.is_symlink():
        if replaceable(target) or not any(target.iterdir()):
            return
        raise OutputError(
            target,
            "an existing directory that is not a bundle popprof wrote (or it holds other files): "
            f"replacing it would delete what it holds; write inside it, e.g. -o {target / example}",
        )
    kind = _special_kind(target)
    if kind is not None:
        raise OutputError(target, f"it is {kind}: a bundle is a directory")
    raise OutputError(target, "an existing file, where a directory would go")


_SPECIAL_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
)


def _special_kind(target: Path) -> str | None:
    """What ``target`` (following symlinks) is when it exists and is neither a regular file nor a directory."""
    if str(target) == "-":
        return "standard output"
    try:
        mode = os.stat(target).st_mode
    except OSError:
        return None
    return next((kind for test, kind in _SPECIAL_KINDS if test(mode)), None)


def _stream_destination(target: Path, directory: bool) -> str | None:
    """``"stdout"`` or ``"device"`` when ``target`` is to receive a stream; OutputError for other special files."""
    from ..model.errors import OutputError

    kind = _special_kind(target)
    if kind is None:
        return None
    if directory:
        raise OutputError(target, f"it is {kind}: a bundle is a directory, it cannot be streamed")
    if str(target) == "-" or _is_stdout(target):
        return "stdout"
    info = os.stat(target)
    if stat.S_ISFIFO(info.st_mode) or _is_dev_null(info) or _is_tty(target):
        return "device"
    raise OutputError(
        target,
        f"it is {kind}, not a regular file, and popprof never replaces one; use -o - for standard output",
    )


def _is_stdout(target: Path) -> bool:
    try:
        return os.path.samestat(os.stat(target), os.fstat(1))
    except (OSError, ValueError):
        return False


def _is_dev_null(info: os.stat_result) -> bool:
    try:
        null = os.stat(os.devnull)
    except OSError:
        return False
    return stat.S_ISCHR(info.st_mode) and info.st_rdev == null.st_rdev


def _is_tty(target: Path) -> bool:
    try:
        fd = os.open(target, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        return os.isatty(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _streamed(target: Path, destination: str) -> Iterator[Path]:
    """A private temporary file whose bytes go to standard output or the device once it is complete."""
    import sys

    fd, name = tempfile.mkstemp(
        prefix="popprof-", suffix="-" + (target.name or "stdout").replace(os.sep, "_")
    )
    os.close(fd)
    tmp = Path(name)
    _ACTIVE[tmp] = target
    try:
        yield tmp
        try:
            with open(tmp, "rb") as source:
                if destination == "stdout":
                    sys.stdout.flush()
                    shutil.copyfileobj(source, sys.stdout.buffer)
                    sys.stdout.buffer.flush()
                else:
                    with open(target, "wb") as sink:
                        shutil.copyfileobj(source, sink)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _output_error(target, exc) from None
    finally:
        _ACTIVE.pop(tmp, None)
        _remove(tmp)


def umask() -> int:
    """The process's umask, read without changing it where Linux says it (``/proc/self/status``)."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    old = os.umask(0o022)  # elsewhere: set and restore at once
    os.umask(old)
    return old


def output_mode(target: Path, directory: bool) -> int:
    """The mode a new output gets: the umask's (``0666``/``0777`` less it), or a replaced regular file's own."""
    if not directory:
        with contextlib.suppress(OSError):
            info = os.stat(target)
            if stat.S_ISREG(info.st_mode):
                return stat.S_IMODE(info.st_mode)
    return (0o777 if directory else 0o666) & ~umask()


def _move_into_place(tmp: Path, target: Path, parent: Path, directory: bool, mode: int | None = None) -> None:
    # mkstemp/mkdtemp make it private; ``mode`` when the caller fixes it (a redaction mapping: 0o600)
    os.chmod(tmp, output_mode(target, directory) if mode is None else mode)
    if directory:
        if target.exists():
            backup = Path(
                tempfile.mkdtemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".old", dir=parent)
            )
            backup.rmdir()
            os.replace(target, backup)
            os.replace(tmp, target)
            _remove(backup)
        else:
            os.replace(tmp, target)
    else:
        os.replace(tmp, target)


def _concerns_output(exc: OSError, tmp: Path) -> bool:
    """True when an error raised while writing ``tmp`` is about the output, not about reading an input."""
    if exc.errno in _OUTPUT_ERRNOS:
        return True
    names = [str(n) for n in (exc.filename, exc.filename2) if n is not None]
    return any(n == str(tmp) or n.startswith(str(tmp) + os.sep) for n in names)


def _output_error(target: Path, exc: Exception) -> OutputError:
    from ..model.errors import OutputError

    target = user_path(target)
    if not isinstance(exc, OSError):
        text = str(exc)
        for tmp, asked in list(_ACTIVE.items()):
            text = text.replace(str(tmp), str(user_path(asked)))
        return OutputError(target, " ".join(text.split()) or type(exc).__name__)
    if isinstance(exc, FileExistsError | NotADirectoryError) and not target.parent.is_dir():
        problem = f"{_first_file_ancestor(target)} is a file, not a directory"
    elif isinstance(exc, IsADirectoryError) or (
        target.is_dir()
        and not target.is_symlink()
        and exc.errno in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST)
    ):
        problem = "it is a directory"
    else:
        problem = exc.strerror or str(exc)
        for tmp, asked in list(_ACTIVE.items()):
            problem = problem.replace(str(tmp), str(user_path(asked)))
    return OutputError(target, " ".join(problem.split()))


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
    from ..model.errors import UsageError

    target = Path(out).resolve()
    for item in inputs:
        if not item or not Path(item).exists():
            continue
        source = Path(item).resolve()
        if target == source or source in target.parents or target in source.parents:
            raise UsageError(
                f"{out}: output would overwrite the input {item} (or sit inside it, or contain "
                "it); choose another path"
            )
