"""Give freed heap memory back to the operating system between the phases of a large read.

Large numpy buffers that are freed often stay in the C heap (glibc raises its mmap
threshold after the first large free, so later buffers come from the heap, whose
free pages are kept). A reader that frees its intermediate columns before building
the next ones calls :func:`release_free_memory` so the next phase reuses real pages
instead of adding to the process's peak. A no-op where glibc's ``malloc_trim`` is
not available.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools


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
    """Return the heap's free pages to the OS (glibc ``malloc_trim(0)``); nothing elsewhere."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
