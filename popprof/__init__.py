"""popprof: scriptable analysis of Graphcore IPU profiles.

Readers turn every form of IPU profiling data into pandas DataFrames with one
schema (:class:`Profile`); rule checks flag memory peaks, exchange-heavy phases
and host stalls; a diff compares profiles and gates regressions; redaction
makes a profile safe to share.
"""

from __future__ import annotations

from ._version import __version__
from .io import config  # noqa: E402  (popprof.config.load_config(): the project's [tool.popprof])
from .model.errors import InputError, MissingTableError, PopprofError  # noqa: E402
from .model.profile import Profile  # noqa: E402
from .readers import open_all  # noqa: E402
from .readers import open_profile as open  # noqa: E402,A001


def export(profile: Profile, out: str, **kwargs: object):
    """Write ``profile`` as a bundle directory at ``out``; returns its path."""
    from .readers import bundle

    return bundle.write(profile, out, **kwargs)


def check(profile: Profile, **kwargs: object):
    """Run the rule checks on ``profile``; returns :class:`popprof.rules.Findings`."""
    from .rules import check as _check

    return _check(profile, **kwargs)


def diff(base: Profile, new: Profile, **kwargs: object):
    """Compare two profiles; returns :class:`popprof.compare.ProfileDiff`."""
    from .compare import diff as _diff

    return _diff(base, new, **kwargs)


def redact(source: str, out: str, **kwargs: object):
    """Redact a profile file or bundle into ``out``; returns a redaction report."""
    from .redaction import redact as _redact

    return _redact(source, out, **kwargs)


__all__ = [
    "InputError",
    "MissingTableError",
    "PopprofError",
    "Profile",
    "__version__",
    "check",
    "config",
    "diff",
    "export",
    "open",
    "open_all",
    "redact",
]
