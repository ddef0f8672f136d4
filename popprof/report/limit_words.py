"""The run's limit in words (``what_limits.limit``, :func:`popprof.metrics.limit.limit_of`): summary's "What
limits this run", check's heading of a profile, pilot's diagnosis and the HTML all say it with these."""

from __future__ import annotations

from ..io import units
from ..metrics.limit import UNDETERMINED


def limit_items(limit: dict, lead: str = "Limit: ") -> list[str]:
    """The run's limit (``what_limits.limit``, :func:`popprof.metrics.limit.limit_of`) as items for
    :func:`popprof.report.explain.pack` with ``sep=", "``: the limit and its share of the windows, then the
    other groups, largest first (at most three)."""
    whole = "the devices' windows" if limit.get("devices", 1) > 1 else "the window"
    share = units.percent(limit["share"])
    if limit["limit"] == UNDETERMINED:
        head = f"{lead}undetermined, {share} of {whole} with no recorded cause;"
    else:
        head = f"{lead}{limit['limit']}, {share} of {whole};"
    rest = [
        f"{group} {units.percent(value)}"
        for group, value in limit["groups"].items()
        if group != limit["limit"] and value >= 0.0005
    ][:3]
    if rest:
        rest[0] = "then " + rest[0]
    return [head, *rest]


def limit_text(limit: dict, lead: str = "Limit: ") -> str:
    """:func:`limit_items` as one line (pilot's diagnosis, the HTML)."""
    head, *rest = limit_items(limit, lead)
    return f"{head} {', '.join(rest)}" if rest else head.rstrip(";")
