"""Give freed heap memory back to the operating system between the phases of a large read.

Large numpy buffers that are freed often stay in the C heap (glibc raises its mmap
threshold after the first large free, so later buffers come from the heap, whose
free pages are kept). A reader that frees its intermediate columns before building
the next ones calls :func:`release_free_memory` so the next phase reuses real pages
instead of adding to the process's peak. Arrow's own allocator (mimalloc or
jemalloc) keeps freed memory too and is asked to release it. ``malloc_trim`` is a
no-op where glibc is not the C library.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys


@functools.cache
def _malloc_trim():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_free_memory() -> None:
    """Return free heap pages to the OS: glibc's ``malloc_trim(0)`` and Arrow's allocator's unused memory."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
    arrow = sys.modules.get("pyarrow")
    if arrow is not None:
        arrow.default_memory_pool().release_unused()
