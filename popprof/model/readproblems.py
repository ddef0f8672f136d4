"""What a reader counted as suspect in its input (``warnings.<key>`` metadata), in plain language.

Readers record problems they worked around (a truncated file, end events
without a begin, events overlapping their parent) as ``warnings.<key>``
metadata: a count, or for ``truncated`` the parser's message. The metadata
travels with the profile into a bundle, so ``popprof tables`` and
``popprof summary`` of the bundle still show them; the CLI says them on
stderr once, when it reads the original source.
"""

from __future__ import annotations

import re

from .profile import Profile

PREFIX = "warnings."

#: key -> what it means for the figures, with ``{n}`` for the count and ``{one|many}`` for the words that
#: follow it (``{event has|events have}``: the first when the count is 1).
MEANINGS: dict[str, str] = {
    "truncated": "the file ends early: events after the cut are missing",
    "damaged": "the file is damaged before its end (not cut off): events after the damage are missing",
    "missing_fields": "{n} {event|events} lacked a timestamp or duration: skipped, or given a duration of 0",
    "negative_duration": "{n} {event|events} had a negative duration: counted as 0",
    "huge_duration": "{n} {event|events} lasted longer than 12 days (beyond any profiler's recording): "
    "counted as 0",
    "malformed_events": "{n} {entry|entries} of the event list {is not an event|are not events}: skipped",
    "unmatched_begin": "{n} begin (B) {event never ends: its duration is|events never end: their durations are} "
    "unknown",
    "unmatched_end": "{n} end (E) {event has|events have} no begin: dropped",
    "out_of_order_timestamps": "{n} begin/end {event is|events are} out of time order on {its|their} thread",
    "partial_overlap": "{n} {event starts|events start} inside another event on {its|their} thread but "
    "{ends|end} after it: which event {it belongs|they belong} to (nesting, self time) is a best guess",
    "bad_duration": "{n} {event has|events have} a missing or negative duration",
    "long_events": "{n} {event|events} longer than the event-bytes limit {was|were} read without {its|their} "
    "nested arrays and objects (args values such as input lists became null; see docs/limits.md)",
    "unread_rows": "{n} {row|rows} of the export's event tables {was|were} not read: {its|their} table lacks a "
    "column popprof needs (the metadata's nsys.tables_lacking_columns names {it|them})",
    "rank_given": "{n} {file|files} of the rank directory {has|have} no rank (no distributedInfo.rank or "
    "MPI Rank thread, no rank-N in {its|their} name): given the lowest {rank|ranks} no file has (the "
    "metadata's trace.rank_notes names {it|them})",
    "sessions_apart": "{n} {export's session starts|exports' sessions start} more than an hour after the "
    "first rank's: the ranks of one run start together, so {it is|they are} likely of another run (times across "
    "ranks, collective skew and stragglers then compare runs; the metadata's nsys.rank_offsets_us)",
    "unparsed_memory_errors": "{n} {line looks|lines look} like an out-of-memory error but {is|are} in no form "
    "popprof reads: not counted as {a failure|failures} (the metadata's oom_log.unparsed lists {it|them})",
}

_CHOICE = re.compile(r"\{([^{}|]*)\|([^{}|]*)\}")


def meaning(template: str, count: str) -> str:
    """``template`` with ``{n}`` as ``count`` and each ``{one|many}`` chosen by it."""
    return _CHOICE.sub(lambda m: m[1] if count == "1" else m[2], template).replace("{n}", count)


def problems(profile: Profile) -> dict[str, str]:
    """Problem key -> its plain-language meaning, for every ``warnings.*`` entry that is set."""
    out = {}
    for key, value in sorted(profile.meta.items()):
        if not key.startswith(PREFIX) or value in ("", "0", 0, None):
            continue
        name = key[len(PREFIX) :]
        template = MEANINGS.get(name)
        if template is None:
            out[name] = f"{name}={value}"
        elif name in ("truncated", "damaged"):
            out[name] = f"{template} ({value})"
        else:
            out[name] = meaning(template, _count(value))
    return out


def _count(value: object) -> str:
    try:
        return f"{int(float(str(value))):,}"
    except ValueError:
        return str(value)


def describe(profile: Profile) -> str | None:
    """All of a profile's read problems in one line (None when there are none)."""
    found = problems(profile)
    return "; ".join(found.values()) if found else None
