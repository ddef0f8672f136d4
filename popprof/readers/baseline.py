"""Reader for popprof baselines (``popprof baseline PATH -o baseline.json``).

A baseline is a JSON object tagged ``"format": "popprof-baseline"`` holding a
profile's metrics; it reads into a Profile with a ``target`` table and the
metric values in its metadata, which :func:`popprof.compare` uses directly.
"""

from __future__ import annotations

from pathlib import Path

from ..model.profile import Profile

FORMAT = "baseline"
TAG = b'"popprof-baseline"'


def sniff(path: Path, head: bytes) -> bool:
    """A JSON object whose head carries the baseline format tag."""
    return path.is_file() and head.lstrip()[:1] == b"{" and TAG in head


def read(path: Path, **_options: object) -> Profile:
    """Read a baseline file."""
    from ..compare.baseline import read_baseline

    return read_baseline(path)
