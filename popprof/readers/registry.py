"""The reader registry: which formats popprof reads, in which order they are tried, and detection.

Detection is by content (each reader's ``sniff`` on the first bytes of the file, gunzipped when the
file is gzip), then by what a directory holds; the readers themselves are imported only when
detection reaches them.
"""

from __future__ import annotations

import importlib
import stat
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from ..io import bounded
from ..io.files import gzip_truncated, read_head
from ..model.errors import InputError

#: Reader modules in detection order (most specific first).
READER_MODULES: tuple[str, ...] = (
    "bundle",
    "nsys",
    "pop",
    "pvti",
    "baseline",
    "sdk1_json",
    "rocprof",
    "xplane",
    "chrome",
    "text_summary",
    "oom_log",
)

#: Readers that classify device activity themselves (``device_map`` option); other readers' events
#: (a bundle of a trace) are re-classified after reading.
MAP_WHILE_READING: frozenset[str] = frozenset({"chrome_trace", "nsys", "pvti", "rocprof", "xplane"})


def reader_modules() -> Iterator[ModuleType]:
    """The reader modules that exist in this installation, in detection order, each imported only when
    reached (a trace is claimed before the text readers, whose patterns take a while to compile)."""
    for name in READER_MODULES:
        full = f"{__package__}.{name}"
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
            path, "directory holds no profile (no profile.pop, *.pvti, bundle manifest, trace or *.xplane.pb)"
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
        "SDK 1.x JSON, Chrome trace JSON, rocprofv3 JSON, an Nsight Systems SQLite export, an XPlane "
        "*.xplane.pb or a log with a Poplar out-of-memory message",
    )
