"""The leak scan's own detector of personal data in text: credentials in URLs, secrets assigned to a
keyword or of a known token format, e-mail addresses, home directories and other absolute paths, IP
addresses, host names, and the user of a home directory.

It is written apart from the redactor's detector (:mod:`.scrub`) and imports nothing of it, of the
redactor or of its allowlist: what one misses the other may catch. It reads only data shared by both
(the key names of :mod:`.keynames`, the public hosts of :mod:`.vocabulary.builtin`) and the pseudonyms'
shape (:data:`.pseudonym.PREFIXES`, a fact of the output format), which it never reports. Each finding
is ``(kind, span)``; the scan reports the kind and the place, never the span.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

from .keynames import ASSIGNED_SECRET
from .pseudonym import PREFIXES
from .vocabulary.builtin import PUBLIC_HOSTS

#: The shape of a popprof pseudonym (``host_3f9a2c1b07de``, ``path_...py``): keyed output, never a leak.
PSEUDONYM = re.compile(
    r"(?:{})_[0-9a-f]{{12}}(?:[0-9a-f]{{12}})?(?:\.\w{{1,8}})?".format(
        "|".join(sorted(set(PREFIXES.values())))
    )
)
#: Every kind the detector reports.
KINDS = ("url", "secret", "email", "path", "ip", "host", "user")
_HOMES = r"/home/|/Users/|/export/home/|[A-Za-z]:\\Users\\"
_RULES: tuple[tuple[str, re.Pattern[str], int], ...] = (
    ("url", re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s/@:\"'<>]+:[^\s/@\"'<>]+@[^\s\"'<>]*"), 0),
    ("secret", ASSIGNED_SECRET, 1),
    (
        "secret",
        re.compile(
            r"(?<![\w-])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|xox[abprs]-[\w-]{10,}|"
            r"sk-[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16}|hf_[A-Za-z0-9]{20,})"
        ),
        0,
    ),
    ("email", re.compile(r"(?<![\w.%+-])[\w.%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"), 0),
    # a home directory and what follows, any absolute path under a data or scratch root, a Windows path,
    # and a URL-encoded one
    (
        "path",
        re.compile(
            rf"(?:{_HOMES}|~/|/(?:mnt|data|scratch|work|gpfs|lustre|nfs|net|srv|tmp|opt|var)/)"
            r"[^\s\"'<>|,;]*"
        ),
        0,
    ),
    ("path", re.compile(r"(?<![\w])[A-Za-z]:\\[^\s\"'<>|*?,;]+"), 0),
    ("path", re.compile(r"(?i)(?<![\w%])(?:%2F|%5C)[^\s\"'<>]+"), 0),
    ("ip", re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w]|\.\d)"), 0),
    ("ip", re.compile(r"(?<![\w:])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?![\w:])"), 0),
    (
        "host",
        re.compile(
            r"(?i)(?<![\w.@/-])(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+"
            r"(?:com|net|org|edu|gov|io|ai|dev|cloud|internal|local|lan|corp|intranet|cluster|svc|home)"
            r"(?![\w.-])"
        ),
        0,
    ),
    ("user", re.compile(rf"(?:{_HOMES})([A-Za-z_][\w.-]*)"), 1),
)
#: Users of a home directory that name no one (``/home/runner``, ``/Users/Shared``).
_NOBODY = frozenset({"root", "shared", "Shared", "Public", "runner", "admin", "default", "user", "ubuntu"})
#: Text without one of these holds none of the shapes above (a quick test before the patterns).
_TRIGGER = re.compile(r"[/\\@:=%~.]|_[A-Za-z0-9]{16}|AKIA|-[A-Za-z0-9_-]{10}")


def _real(kind: str, span: str) -> bool:
    if not span or PSEUDONYM.fullmatch(span) or PSEUDONYM.match(span.lstrip("/")):
        return False
    if kind == "ip":
        if ":" in span and (span.count(":") < 2 or not any(c.isdigit() for c in span)):
            return False
        try:
            address = ipaddress.ip_address(span)
        except ValueError:
            return False
        return not (address.is_loopback or address.is_unspecified)
    if kind == "host":
        low = span.lower().rstrip(".")
        return not any(low == h or low.endswith("." + h) for h in PUBLIC_HOSTS)
    if kind == "user":
        return span not in _NOBODY
    return True


def find(text: str, kinds: Iterable[str] = KINDS) -> list[tuple[str, str]]:
    """Personal data in ``text`` as ``(kind, span)``, in the order of :data:`KINDS`."""
    if _TRIGGER.search(text) is None:
        return []
    wanted = set(kinds)
    return [
        (kind, match.group(group))
        for kind, pattern, group in _RULES
        if kind in wanted
        for match in pattern.finditer(text)
        if _real(kind, match.group(group))
    ]
