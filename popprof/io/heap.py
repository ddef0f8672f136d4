"""The C heap while reading and writing large files: give freed memory back between phases, keep freed
large blocks for reuse while streaming, and pause the cyclic garbage collector.

- :func:`release_free_memory`: large numpy buffers that are freed often stay in the C heap (glibc
  raises its mmap threshold after the first large free, so later buffers come from the heap, whose
  free pages are kept). A reader that frees its intermediate columns before building the next ones
  calls it so the next phase reuses real pages instead of adding to the process's peak. Arrow's own
  allocator (mimalloc or jemalloc) keeps freed memory too and is asked to release it.
- :func:`reuse_large_blocks`: streaming code allocates and frees blocks of several megabytes
  thousands of times; glibc hands such blocks back to the kernel (``mmap``/``munmap``, heap
  trimming), so every new block is faulted in and zeroed again: on a 1.3 GB trace that was about a
  sixth of the redaction's CPU time. Inside the ``with`` block the mmap and trim thresholds are
  raised; afterwards glibc's defaults are restored and the heap trimmed, so a notebook process does
  not keep the memory.
- :func:`gc_paused`: stops the cyclic collector from walking the millions of short-lived strings a
  stream creates (they form no cycles) and restores it after.

Everything here is a no-op where glibc is not the C library.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import sys
from collections.abc import Iterator

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: glibc's cap for M_MMAP_THRESHOLD on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX).
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 1 << 30
_DEFAULT_MMAP, _DEFAULT_TRIM = 128 << 10, 128 << 10


@functools.cache
def _libc():
    # the symbols already loaded into this process (libc among them): no library search, which would
    # run ``ldconfig`` in a subprocess
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    if not (hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt")):
        return None
    libc.malloc_trim.argtypes = [ctypes.c_size_t]
    libc.malloc_trim.restype = ctypes.c_int
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.mallopt.restype = ctypes.c_int
    return libc


def release_free_memory() -> None:
    """Return free heap pages to the OS: glibc's ``malloc_trim(0)`` and Arrow's allocator's unused memory."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
    arrow = sys.modules.get("pyarrow")
    if arrow is not None:
        arrow.default_memory_pool().release_unused()


@contextlib.contextmanager
def reuse_large_blocks() -> Iterator[None]:
    """Inside the block, freed blocks up to :data:`MMAP_THRESHOLD` stay in the heap for reuse."""
    libc = _libc()
    if libc is None or not libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD):
        yield
        return
    libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    try:
        yield
    finally:
        libc.mallopt(_M_MMAP_THRESHOLD, _DEFAULT_MMAP)
        libc.mallopt(_M_TRIM_THRESHOLD, _DEFAULT_TRIM)
        libc.malloc_trim(0)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Inside the block the cyclic garbage collector does not run (reference counting still frees)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
