"""The C heap while reading and writing large files: give freed memory back between phases, and pause the
cyclic garbage collector. Nothing here changes the allocator's settings (``mallopt``): they would hold for the
whole process (a notebook kernel keeps them), and setting glibc's mmap threshold at all ends its dynamic
adjustment for good; dropping the setting cost nothing measurable (docs/traces.md, "The C heap").

- :func:`release_free_memory`: large numpy buffers that are freed often stay in the C heap (glibc
  raises its mmap threshold after the first large free, so later buffers come from the heap, whose
  free pages are kept). A reader that frees its intermediate columns before building the next ones
  calls it so the next phase reuses real pages instead of adding to the process's peak. Arrow's own
  allocator (mimalloc or jemalloc) keeps freed memory too and is asked to release it.
- :func:`gc_paused`: stops the cyclic collector from walking the millions of short-lived strings a
  stream creates (they form no cycles) and restores it after.

- :func:`keep_freed_memory_in_helper`: only in a forked helper process of popprof's own, which ends with
  its job (the leak scan's halves): glibc keeps freed memory instead of unmapping it and faulting it in
  again, and Arrow allocates from the same heap. Refused (a no-op) in any process that is not such a
  child, so the user's process (a notebook kernel) never gets an allocator setting.

Everything here is a no-op where glibc is not the C library.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import sys
from collections.abc import Iterator


@functools.cache
def _libc():
    # the symbols already loaded into this process (libc among them): no library search, which would
    # run ``ldconfig`` in a subprocess
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    if not hasattr(libc, "malloc_trim"):
        return None
    libc.malloc_trim.argtypes = [ctypes.c_size_t]
    libc.malloc_trim.restype = ctypes.c_int
    if hasattr(libc, "mallopt"):
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


#: glibc's ``mallopt`` parameters (malloc.h) and the values a helper process uses: blocks up to 256 MiB come
#: from the heap, and the heap is never trimmed while the helper runs (it gives everything back when it ends).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
HELPER_MMAP_THRESHOLD = 256 << 20


def keep_freed_memory_in_helper() -> bool:
    """In a forked helper process (``multiprocessing.parent_process()`` is set), keep freed memory for reuse:
    glibc's mmap threshold at :data:`HELPER_MMAP_THRESHOLD`, no heap trimming, and Arrow's default pool on the
    same C heap. Measured: the leak scan's derivation of a 1.4 GB trace faulted in about 1 million pages
    (2 s of system time) without it, 11,000 with it (``docs/redaction.md``). Returns whether it was applied;
    anywhere else (the user's own process) it does nothing."""
    import multiprocessing

    libc = _libc()
    if multiprocessing.parent_process() is None or libc is None or not hasattr(libc, "mallopt"):
        return False
    libc.mallopt(_M_MMAP_THRESHOLD, HELPER_MMAP_THRESHOLD)
    libc.mallopt(_M_TRIM_THRESHOLD, 2 * HELPER_MMAP_THRESHOLD)
    arrow = sys.modules.get("pyarrow")
    if arrow is not None:
        with contextlib.suppress(Exception):
            arrow.set_memory_pool(arrow.system_memory_pool())
    return True


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
