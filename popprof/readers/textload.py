"""Load a text file once for the text readers (sniffing and reading a large log share one decode).

Detection may have two text readers look at the whole of a log (the text summary reader, then the
out-of-memory log reader), and the chosen one then reads it: without sharing, a 50 MB log would be
read and decoded three times. The last text loaded is kept, keyed by path, size and modification
time, until :func:`release` (called when a read ends or detection gives up).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from ..io.files import open_binary, read_text_bytes

#: Bytes of a log decoded at a time by :func:`windows` (a streaming pass keeps about twice this).
WINDOW_BYTES = 16 << 20

_cached: tuple[tuple[str, int, int], str] | None = None


def _key(path: Path) -> tuple[str, int, int]:
    stat = os.stat(path)
    return (os.path.abspath(path), stat.st_size, stat.st_mtime_ns)


def load_text(path: Path) -> str:
    """The file's text within the ``text-bytes`` / ``line-bytes`` limits, shared between readers.

    UTF-8 with undecodable bytes replaced and the BOM dropped; gzip is read transparently.
    """
    global _cached
    key = _key(path)
    if _cached is not None and _cached[0] == key:
        return _cached[1]
    _cached = None  # drop the previous text before reading the next
    text = read_text_bytes(path).decode("utf-8", errors="replace").lstrip("\ufeff")  # docs/limits.md
    _cached = (key, text)
    return text


def release() -> None:
    """Forget the kept text (its memory is freed once no reader holds it)."""
    global _cached
    _cached = None


def windows(path: Path, size: int = WINDOW_BYTES) -> Iterator[tuple[int, str]]:
    """The whole (gunzipped) text of ``path``, whatever its size, as ``(first line number, text)`` windows.

    Each window ends at a line end (unless one line is longer than a window), so a message on one
    line is never cut in two; memory stays at about two windows. Undecodable bytes are replaced.
    """
    line = 1
    carry = b""
    with open_binary(Path(path)) as handle:
        while True:
            block = handle.read(size)
            data = carry + block
            if not block:
                if data:
                    yield line, data.decode("utf-8", errors="replace")
                return
            cut = data.rfind(b"\n") + 1
            if cut == 0 and len(data) < size:
                carry = data
                continue
            cut = cut or len(data)
            text = data[:cut].decode("utf-8", errors="replace")
            carry = data[cut:]
            if line == 1:
                text = text.lstrip("\ufeff")
            yield line, text
            line += text.count("\n")
