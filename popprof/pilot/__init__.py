"""``popprof pilot``: an IPU run next to the platform it is compared with, the same figures on both sides.

:func:`pilot` returns a JSON-ready dict (schema :data:`SCHEMA_VERSION`, see docs/pilot.md);
:mod:`popprof.pilot.render` turns it into text, Markdown and HTML.
"""

from .diagnose import DEFAULT_THRESHOLDS, diagnose, thresholds_from
from .figures import FIGURES, SCHEMA_VERSION, pilot, side

__all__ = ["DEFAULT_THRESHOLDS", "FIGURES", "SCHEMA_VERSION", "diagnose", "pilot", "side", "thresholds_from"]
