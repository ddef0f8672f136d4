"""Describe source files (name, size, SHA-256) for the metadata and the bundle manifest."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path


def sha256_file(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file, streamed through one reused buffer (``hashlib.file_digest``: no new block per read,
    so no page faults beside a reader that runs meanwhile in the same process)."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def describe_sources(paths: list[str | os.PathLike[str]]) -> list[dict[str, object]]:
    """One record per source file: its base name, size in bytes and SHA-256."""
    records = []
    for p in paths:
        path = Path(p)
        if path.is_file():
            records.append(
                {"name": path.name, "size_bytes": path.stat().st_size, "sha256": sha256_file(path)}
            )
    return records


def source_metadata(source_format: str, paths: list[str | os.PathLike[str]]) -> dict[str, str]:
    """Metadata entries every reader records: the format and the source files."""
    return {"source_format": source_format, "source_files": json.dumps(describe_sources(paths))}


def describe_meanwhile(source_format: str, path: str | os.PathLike[str]) -> Callable[[], dict[str, str]]:
    """Start :func:`source_metadata` of one file on a thread of the one parallel helper (hashing releases the
    GIL, so it runs beside this thread's work) and return the callable that waits for it. With parallel work
    off (``POPPROF_PARALLEL=0``) the description is made here, first."""
    from .parallel import thread_pool

    pool = thread_pool(1)
    future = pool.submit(source_metadata, source_format, [path])
    pool.shutdown(wait=False)
    return future.result
