"""Writers: render a Profile in the input forms other tools produce (for fixtures, tests and interop).

- :func:`popprof.testing.writers.text_summary.write_text_summary`: Poplar's ``printProfileSummary`` text.
- :func:`popprof.testing.writers.sdk1_json.write_sdk1_json`: the SDK 1.x ``graphProfile`` /
  ``executionProfile`` JSON.

Every writer writes atomically (see :mod:`popprof.io.atomic`).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["write_sdk1_json", "write_text_summary"]


def write_text_summary(*args: object, **kwargs: object) -> Path:
    """Forward to :func:`popprof.testing.writers.text_summary.write_text_summary`."""
    from .text_summary import write_text_summary as _write

    return _write(*args, **kwargs)


def write_sdk1_json(*args: object, **kwargs: object) -> list[Path]:
    """Forward to :func:`popprof.testing.writers.sdk1_json.write_sdk1_json`."""
    from .sdk1_json import write_sdk1_json as _write

    return _write(*args, **kwargs)
