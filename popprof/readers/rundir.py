"""What a run directory holds: the one discovery of :func:`popprof.open_all` and ``popprof record``.

A run directory is what ``autoReport.directory`` and ``PVTI_OPTIONS.directory`` produce: a
``profile.pop`` per engine (Poplar writes one subdirectory per engine; frameworks may add one more
level, so reports are looked for down to :data:`REPORT_DEPTH` levels), ``.pvti`` traces at the top
or one level below (:data:`TRACE_DEPTH`), and, in a directory popprof wrote, bundles (one per engine).
Files are found by name only (``since`` adds their age: ``record`` keeps what CMD wrote); reading
them is the readers' job. Hidden directories are skipped, bundles are not descended into.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .bundle import is_bundle

REPORT_FILE = "profile.pop"
TRACE_SUFFIX = ".pvti"
#: How deep below the run directory profiles (and bundles) are looked for.
REPORT_DEPTH = 2
#: How deep below the run directory traces are looked for.
TRACE_DEPTH = 1
#: Files modified this long before ``since`` still count (coarse file-system clocks).
MTIME_SLACK_S = 2.0


@dataclass(frozen=True)
class Entry:
    """One input of a run directory: its profile name, its path and its kind (report, bundle, trace)."""

    name: str
    path: Path
    kind: str


def _recent(path: Path, since: float | None) -> bool:
    if since is None:
        return True
    try:
        return path.stat().st_mtime >= since - MTIME_SLACK_S
    except OSError:
        return False


def _walk(root: Path, depth: int) -> Iterator[tuple[Path, tuple[str, ...]]]:
    """``root`` and its subdirectories down to ``depth`` levels (sorted, hidden ones and bundles not
    entered), each with its path below ``root``. Listing ``root`` may raise ``OSError``; a subdirectory
    that cannot be listed is skipped."""
    level = [root]
    for at in range(depth + 1):
        following: list[Path] = []
        for directory in level:
            yield directory, directory.relative_to(root).parts
            if at == depth or (directory is not root and is_bundle(directory)):
                continue
            try:
                children = sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith("."))
            except OSError:
                if directory is root:
                    raise
                continue
            following.extend(children)
        level = following


def reports(root: Path, since: float | None = None, bundles: bool = True) -> list[Entry]:
    """Every ``profile.pop`` (and, with ``bundles``, every bundle below ``root``), named by engine.

    The engine name is the path below ``root`` (``training``; ``a-b`` for ``a/b``), or ``root``'s own
    name for a profile at its top.
    """
    found = []
    for directory, parts in _walk(root, REPORT_DEPTH):
        name = "-".join(parts) if parts else (root.name or "profile")
        path = directory / REPORT_FILE
        if path.is_file() and _recent(path, since):
            found.append(Entry(name, path, "report"))
        elif bundles and parts and is_bundle(directory) and _recent(directory, since):
            found.append(Entry(name, directory, "bundle"))
    return found


def traces(root: Path, since: float | None = None) -> list[Entry]:
    """Every ``.pvti`` in ``root`` and down to :data:`TRACE_DEPTH` levels below, named by its stem."""
    return [
        Entry(path.stem, path, "trace")
        for directory, _ in _walk(root, TRACE_DEPTH)
        for path in sorted(directory.glob(f"*{TRACE_SUFFIX}"))
        if path.is_file() and _recent(path, since)
    ]


def entries(root: Path, since: float | None = None) -> list[Entry]:
    """The reports, bundles and traces of the run directory ``root`` (empty when it holds none)."""
    return reports(root, since) + traces(root, since)


def holds_run(path: Path) -> bool:
    """Whether ``path`` itself holds a report or a trace at its top (so it is a run directory, not, say,
    a directory of rank traces)."""
    with contextlib.suppress(OSError):
        return (path / REPORT_FILE).is_file() or any(path.glob(f"*{TRACE_SUFFIX}"))
    return False
