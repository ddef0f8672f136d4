"""Nsight Systems' SQLite export (``nsys export --type sqlite``) into event tables, as a GPU trace.

The export is an SQLite database: every string is an id into ``StringIds``, times are nanoseconds from the
session's start, and a thread is a ``globalTid`` (pid ``(globalTid >> 24) & 0xFFFFFF``, tid
``globalTid & 0xFFFFFF``). Each table is read with one SQL query (the file is opened read-only):

- ``CUPTI_ACTIVITY_KIND_KERNEL``: kernels (channel ``kernel``, named by ``demangledName``, else
  ``shortName``), device work on one track per (GPU, stream): ``pid`` the ``deviceId``, ``tid`` and
  ``stream`` the ``streamId``, ``device`` ``gpu:N``;
- ``CUPTI_ACTIVITY_KIND_MEMCPY`` / ``_MEMSET``: copies (``gpu_memcpy``) and memsets (``gpu_memset``) on their
  stream, named as Kineto names them (``Memcpy HtoD (Pageable -> Device)``, ``Memset (Device)``);
- ``CUPTI_ACTIVITY_KIND_RUNTIME``: CUDA runtime (``cuda_runtime``) and driver (``cuda_driver``) calls on
  their thread, without the ``_v7000`` version suffix nsys keeps;
- ``NVTX_EVENTS``: NVTX push/pop and start/end ranges (``user_annotation``) on the thread that opened them,
  named by ``text`` or ``textId``;
- ``correlationId`` is ``events.correlation``: it joins a runtime call to the kernel, copy or memset it
  launched;
- ``SCHED_EVENTS``: host threads' context switches, each sched-in to the next sched-out of its thread one
  on-CPU interval (the ``cpu_slices`` table); ``COMPOSITE_EVENTS`` with ``SAMPLING_CALLCHAINS``: CPU samples
  named by their leaf frame's function, with the call each was inside (``cpu_samples``; inside a traced
  ``MPI_*`` NVTX range of its thread, communication).

Modules: :mod:`.database` opens and checks the file, :mod:`.reading` builds the Profile, :mod:`.host` reads
the context switches and CPU samples. See
``docs/readers.md``.
"""

from __future__ import annotations

from pathlib import Path

FORMAT = "nsys"
#: the first 16 bytes of every SQLite 3 database
SQLITE_MAGIC = b"SQLite format 3\x00"

__all__ = ["FORMAT", "SQLITE_MAGIC", "read", "sniff"]


def sniff(path: Path, head: bytes) -> bool:
    """An SQLite database with nsys's ``StringIds`` table (a PopVision ``profile.pop`` is SQLite too).

    nsys creates ``StringIds`` first, so its schema is in the first page; when it is not in ``head`` the
    schema is asked for (read-only; a file SQLite cannot read is no nsys export here)."""
    if path.is_dir() or not head.startswith(SQLITE_MAGIC):
        return False
    if b"StringIds" in head:
        return True
    import sqlite3

    try:
        connection = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
        try:
            found = connection.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'StringIds'"
            ).fetchone()
        finally:
            connection.close()
    except sqlite3.Error:
        return False
    return found is not None


def read(path: Path, **options: object):  # noqa: ANN201 - the Profile, imported with pandas when reading
    """Read an Nsight Systems SQLite export into a Profile (see :func:`.reading.read`)."""
    from .reading import read as read_file

    return read_file(path, **options)
