"""What a reader counted as suspect in its input (``warnings.<key>`` metadata), in plain language.

Readers record problems they worked around (a truncated file, end events
without a begin, events overlapping their parent) as ``warnings.<key>``
metadata: a count, or for ``truncated`` the parser's message. The metadata
travels with the profile into a bundle, so ``popprof tables`` and
``popprof summary`` of the bundle still show them; the CLI says them on
stderr once, when it reads the original source.
"""

from __future__ import annotations

from .profile import Profile

PREFIX = "warnings."

#: key -> what it means for the figures, with ``{n}`` for the count.
MEANINGS: dict[str, str] = {
    "truncated": "the file ends early: events after the cut are missing",
    "missing_fields": "{n} event(s) lacked a timestamp or duration: skipped, or given a duration of 0",
    "negative_duration": "{n} event(s) had a negative duration: counted as 0",
    "malformed_events": "{n} entries of the event list are not events: skipped",
    "unmatched_begin": "{n} begin (B) event(s) never end: their durations are unknown",
    "unmatched_end": "{n} end (E) event(s) have no begin: dropped",
    "out_of_order_timestamps": "{n} begin/end event(s) are out of time order on their thread",
    "partial_overlap": "{n} event(s) start inside another event on their thread but end after it: "
    "which event they belong to (nesting, self time) is a best guess",
    "bad_duration": "{n} event(s) have a missing or negative duration",
    "unparsed_memory_errors": "{n} line(s) look like an out-of-memory error but are in no form popprof reads: "
    "not counted as failures (the metadata's oom_log.unparsed lists them)",
    "long_events": "{n} event(s) longer than the event-bytes limit were read without their nested arrays and "
    "objects (args values such as input lists became null; see docs/limits.md)",
}


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
        elif name == "truncated":
            out[name] = f"{template} ({value})"
        else:
            out[name] = template.format(n=_count(value))
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
