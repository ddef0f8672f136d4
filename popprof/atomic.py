"""Write outputs atomically: to a temporary name beside the target, renamed when complete."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str], *, directory: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; move it onto ``target`` on success.

    With ``directory=True`` the temporary path is an empty directory. On any
    exception the temporary path is removed and ``target`` is left untouched.
    An existing ``target`` is replaced only once the new one is complete.
    """
    target = Path(target)
    parent = target.parent if str(target.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    if directory:
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent))
    else:
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
        os.close(fd)
        tmp = Path(name)
    try:
        yield tmp
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
    except BaseException:
        _remove(tmp)
        raise


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
