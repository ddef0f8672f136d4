"""Free-text scrubbing: paths, home directories, usernames, hostnames, emails, IP addresses,
URLs with credentials, tokens and keys, environment-variable values.

:class:`Scrubber` replaces each sensitive span with a keyed pseudonym of its
kind (``path_3f9a2c1b.py``, ``host_0c1d2e3f``, ``secret_...``), so the same
value reads the same everywhere. :func:`detect` finds the same spans without
replacing them; the leak scan uses it on the output, whatever the policy said.
All patterns are compiled once; ``scrub_json`` walks JSON values and treats
the values of sensitive keys (``hostname``, ``user``, ``token``, ...) as a whole.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable

from ..model.schema import TABLES
from ..readers.bundle import MANIFEST
from .keynames import key_kind
from .pseudonym import PREFIXES
from .vocabulary.builtin import PUBLIC_HOSTS

#: Scrubber families a policy can switch off (``scrub.paths = false``): family -> kinds it covers.
FAMILIES: dict[str, tuple[str, ...]] = {
    "paths": ("path",),
    "users": ("user",),
    "hosts": ("host",),
    "emails": ("email",),
    "ips": ("ip",),
    "urls": ("url",),
    "secrets": ("secret", "token"),
    "env": ("env",),
}

PSEUDONYM_RE = re.compile(
    r"(?:{})_[0-9a-f]{{12}}(?:[0-9a-f]{{12}})?(?:\.\w{{1,8}})?".format(
        "|".join(sorted(set(PREFIXES.values())))
    )
)

_TLDS = (
    "com|net|org|io|edu|gov|mil|local|internal|lan|corp|intranet|cloud|ai|dev|app|co|uk|de|fr|jp|cn|us|eu|"
    "ca|au|nl|se|ch|fi|be|it|es|arpa|cluster|svc|home"
)
_FILE_EXT = (
    "py|pyc|ipynb|yml|yaml|json|cfg|ini|toml|txt|csv|tsv|onnx|pb|pt|pth|ckpt|h5|hdf5|tfrecord|npz|npy|"
    "pop|pvti|cbor|capnp|log|sh|cpp|cc|cxx|hpp|h|so|popef|bin|parquet|zip|tar|gz|tgz|pkl|pickle|"
    "safetensors|conf|xml|md|jsonl|gp|c"
)
PUBLIC_FILES = frozenset(
    {
        "profile.pop",
        "debug.cbor",
        "archive.a",
        "serialized_graph.capnp",
        "framework.json",
        "frameworks.json",
        "app.json",
        MANIFEST,
    }
) | frozenset(f"{table}.parquet" for table in TABLES)
GENERIC_USERS = frozenset(
    {
        "root",
        "shared",
        "Shared",
        "Public",
        "runner",
        "admin",
        "default",
        "user",
        "users",
        "home",
        "ubuntu",
        "localuser",
        "nobody",
    }
)
SAFE_ENV = frozenset(
    {
        "POPLAR_ENGINE_OPTIONS",
        "POPLAR_TARGET_OPTIONS",
        "PVTI_OPTIONS",
        "POPLAR_LOG_LEVEL",
        "POPLIBS_LOG_LEVEL",
        "POPART_LOG_LEVEL",
        "POPTORCH_LOG_LEVEL",
        "GCL_LOG_LEVEL",
        "OMP_NUM_THREADS",
        "POPLAR_RUNTIME_OPTIONS",
        "TF_POPLAR_FLAGS",
    }
)

# Each rule: (kind, compiled pattern, group to replace (0 = whole match)).
_RULES: list[tuple[str, re.Pattern[str], int]] = [
    ("url", re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s/@:\"'<>]+:[^\s/@\"'<>]+@[^\s\"'<>]*"), 0),
    (
        "secret",
        re.compile(
            r"(?i)\b(?:password|passwd|pwd|token|secret|api[_-]?key|apikey|access[_-]?key|"
            r"auth[_-]?token|private[_-]?key|client[_-]?secret)\s*[=:]\s*[\"']?([^\s\"',;&}]+)"
        ),
        1,
    ),
    (
        "secret",
        re.compile(
            r"(?<![\w-])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|xox[abprs]-[\w-]{10,}|"
            r"sk-[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16}|hf_[A-Za-z0-9]{20,}|tok_[A-Za-z0-9]{16,})"
        ),
        0,
    ),
    (
        "env",
        re.compile(r"(?<![\w.-])([A-Z][A-Z0-9_]*[A-Z0-9])=(\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^\s\"',;]+)"),
        2,
    ),
    (
        "email",
        re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"),
        0,
    ),
    ("path", re.compile(r"(?<![\w])[A-Za-z]:\\(?:[^\\\s\"'<>|*?]+\\)*[^\\\s\"'<>|*?,;]*"), 0),
    ("path", re.compile(r"(?<![\w.~:/\\-])(?:~[\w.-]*)?/(?:[\w.@+%~=,*-]+/)*[\w.@+%~=*-]+/?"), 0),
    (
        "path",
        re.compile(rf"(?<![\w./-])(?:\.{{1,2}}/)?(?:[\w.@+-]+/)+[\w.@+*-]+\.(?:{_FILE_EXT})(?![\w/])"),
        0,
    ),
    ("path", re.compile(r"(?<![\w./-])\.{1,2}/[\w.@+/-]*"), 0),
    ("path", re.compile(rf"(?<![\w./-])[\w+-][\w.+-]*\.(?:{_FILE_EXT})(?![\w.])"), 0),
    # URL-encoded paths (%2Fhome%2Fname..., %5C for Windows) up to the next space or quote
    ("path", re.compile(r"(?i)(?<![\w%])(?:[A-Za-z]:)?(?:%2F|%5C)[^\s\"'<>]+"), 0),
    # POSIX paths with spaces under well-known roots, up to a file extension
    (
        "path",
        re.compile(
            rf"(?<![\w.~:/\\-])(?:~|/(?:home|Users|mnt|data|tmp|opt|srv|scratch|work|var|export|"
            rf"net|nfs|gpfs|lustre))(?:/[^/\n\"'<>|]+)*?/[^/\n\"'<>|]*\.(?:{_FILE_EXT})\b"
        ),
        0,
    ),
    # Windows paths with spaces, up to a file extension
    (
        "path",
        re.compile(rf"(?<![\w])[A-Za-z]:\\(?:[^\\\n\"'<>|*?]+\\)*[^\\\n\"'<>|*?]*\.(?:{_FILE_EXT})\b"),
        0,
    ),
    (
        "ip",
        re.compile(
            r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
            r"(?![\w])(?!\.\d)"
        ),
        0,
    ),
    ("ip", re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])"), 0),
    ("secret", re.compile(r"(?<![0-9A-Fa-f])[0-9A-Fa-f]{32,}(?![0-9A-Fa-f])"), 0),
    ("secret", re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/-]{32,}={0,2}(?![A-Za-z0-9+/=_-])"), 0),
    # shorter tokens: base64 with padding, hex of 16+ digits, mixed-case keys of 16+ characters
    ("token", re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/]{8,}={1,2}(?![A-Za-z0-9+/=_-])"), 0),
    ("token", re.compile(r"(?<![0-9A-Za-z_])[0-9a-fA-F]{16,31}(?![0-9A-Za-z_])"), 0),
    ("token", re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9]{16,31}(?![A-Za-z0-9+/=_-])"), 0),
    (
        "host",
        re.compile(
            r"(?i)(?:--?(?:host|hosts|hostname|node|nodes|server)[= ]\s*|\b(?:host(?:name)?|node"
            r"(?:name)?|server)\s*[=:]\s*)([^\s\"',;]+)"
        ),
        1,
    ),
    (
        "user",
        re.compile(
            r"(?i)(?:--?(?:user|username)[= ]\s*|\b(?:user(?:name)?|owner|login)\s*[=:]\s*)"
            r"([^\s\"',;]+)"
        ),
        1,
    ),
    (
        "host",
        re.compile(
            rf"(?<![\w.@/-])(?:[A-Za-z0-9](?:[A-Za-z0-9-]{{0,61}}[A-Za-z0-9])?\.)+(?:{_TLDS})(?![\w.-])",
            re.IGNORECASE,
        ),
        0,
    ),
]

_HOME_RE = re.compile(r"(?:/home/|/Users/|/export/home/|[A-Za-z]:\\Users\\|~)([A-Za-z_][\w.-]*)")


def _valid(kind: str, text: str) -> bool:
    """Extra checks that regexes cannot express (valid IPs, secret-looking strings, public names)."""
    if PSEUDONYM_RE.fullmatch(text) or not text:
        return False
    if kind == "ip":
        if ":" in text and (not re.search(r"\d", text) or len(text) < 4):
            return False
        try:
            addr = ipaddress.ip_address(text)
        except ValueError:
            return False
        return not (addr.is_loopback or addr.is_unspecified)
    if kind == "token" and text.endswith("="):
        return len(set(text.rstrip("="))) >= 6 and not text.rstrip("=").isdigit()
    if kind == "token" and re.fullmatch(r"[0-9A-Fa-f]+", text):
        return any(c.isdigit() for c in text) and any(c.isalpha() for c in text) and len(set(text)) >= 6
    if kind == "token":
        digits = sum(c.isdigit() for c in text)
        upper = sum(c.isupper() for c in text)
        lower = sum(c.islower() for c in text)
        # random keys mix classes; names (``ConvPartial1x1Out``) have runs of lower-case letters
        return (
            digits >= 2
            and upper >= 2
            and lower >= 2
            and len(set(text)) >= 10
            and re.search(r"[a-z]{5}", text) is None
        )
    if (
        kind == "secret"
        and not re.fullmatch(r"[0-9A-Fa-f]+", text)
        and len(text) >= 32
        and "_" not in text
        and not text.startswith(("tok_", "sk-", "gh", "xox", "AKIA", "hf_"))
    ):
        digits = sum(c.isdigit() for c in text)
        upper = sum(c.isupper() for c in text)
        lower = sum(c.islower() for c in text)
        return digits >= 3 and upper >= 3 and lower >= 3 and len(set(text)) >= 16
    if kind == "host":
        low = text.lower().rstrip(".")
        return not any(low == h or low.endswith("." + h) for h in PUBLIC_HOSTS) and low not in PUBLIC_FILES
    if kind == "path":
        return (
            text not in PUBLIC_FILES
            and text not in {"/", "./", "../", "~", "~/"}
            and not text.startswith("//")
        )
    if kind == "user":
        return text not in GENERIC_USERS
    return True


#: Every detector needs one of these (a separator of paths, addresses, e-mails, assignments, or a long run
#: of letters and digits for tokens); text without any is skipped at once.
_TRIGGER = re.compile(r"[/\\@:=%~.]|--|[A-Za-z0-9+]{16}")


def detect(text: str, families: Iterable[str] | None = None) -> list[tuple[str, str]]:
    """Sensitive spans in ``text`` as ``(kind, span)``, without replacing anything."""
    if _TRIGGER.search(text) is None:
        return []
    kinds = _kinds(families)
    found: list[tuple[str, str]] = []
    for kind, pattern, group in _RULES:
        if kind not in kinds:
            continue
        for m in pattern.finditer(text):
            span = m.group(group)
            parts = span.split(",") if kind in ("host", "user") else [span]
            found.extend((kind, p) for p in parts if p and _valid(kind, p))
    for m in _HOME_RE.finditer(text):
        if "user" in kinds and _valid("user", m.group(1)) and not PSEUDONYM_RE.fullmatch(m.group(1)):
            found.append(("user", m.group(1)))
    return found


def _kinds(families: Iterable[str] | None) -> set[str]:
    if families is None:
        families = FAMILIES
    return {k for f in families for k in FAMILIES.get(f, ())}


class Scrubber:
    """Replaces sensitive spans of free text with pseudonyms; remembers what it replaced."""

    def __init__(
        self,
        pseudonym: Callable[[str, str], str],
        families: Iterable[str] | None = None,
        keep: Callable[[str], bool] | None = None,
    ) -> None:
        self._pseudonym = pseudonym
        self.kinds = _kinds(families)
        self._keep = keep or (lambda s: False)
        self.occurrences: Counter[str] = Counter()
        self._known: dict[str, str] = {}  # learned usernames / short hostnames -> kind
        self._known_re: re.Pattern[str] | None = None
        self._cache: dict[str, str] = {}

    @property
    def known(self) -> dict[str, str]:
        """Usernames and hostnames learned from context (value -> kind)."""
        return dict(self._known)

    # -- learning ---------------------------------------------------------
    def learn(self, text: str) -> None:
        """Learn usernames (from home paths) and host/user values given by context, to scrub them anywhere."""
        for m in _HOME_RE.finditer(text):
            self._learn_one("user", m.group(1))
        for kind, pattern, group in _RULES:
            if kind in ("host", "user") and group:
                for m in pattern.finditer(text):
                    for part in m.group(group).split(","):
                        self._learn_one(kind, part)

    def learn_value(self, kind: str, value: str) -> None:
        """Learn a whole value (e.g. the value of a ``hostname`` JSON key)."""
        if kind in ("host", "user"):
            for part in re.split(r"[,\s]+", value):
                self._learn_one(kind, part)

    def _learn_one(self, kind: str, value: str) -> None:
        value = value.strip().strip("\"'")
        if kind not in self.kinds or len(value) < 3 or not _valid(kind, value) or value in self._known:
            return
        if re.fullmatch(r"[\d.:]+", value):
            return  # addresses are handled by the IP rule
        self._known[value] = kind
        words = sorted(self._known, key=len, reverse=True)
        self._known_re = re.compile(r"(?<![\w-])(?:{})(?![\w-])".format("|".join(map(re.escape, words))))
        self._cache.clear()

    # -- replacing --------------------------------------------------------
    def _replace(self, kind: str, span: str) -> str:
        if not _valid(kind, span) or self._keep(span):
            return span
        self.occurrences[kind] += 1
        if kind == "path":
            ext = re.search(r"\.([A-Za-z][A-Za-z0-9]{0,7})$", span.rstrip("/\\"))
            suffix = f".{ext.group(1)}" if ext and ext.group(1).lower() in _FILE_EXT.split("|") else ""
            return self._pseudonym("path", span) + suffix
        if kind == "env":
            return self._pseudonym("env", span)
        return self._pseudonym(kind, span)

    def whole(self, kind: str, value: str) -> str:
        """``value`` replaced as a whole by a pseudonym of ``kind`` (a path keeps its known extension)."""
        self.occurrences[kind] += 1
        if kind == "path":
            ext = re.search(r"\.([A-Za-z][A-Za-z0-9]{0,7})$", value.strip().rstrip("/\\"))
            suffix = f".{ext.group(1)}" if ext and ext.group(1).lower() in _FILE_EXT.split("|") else ""
            return self._pseudonym("path", value) + suffix
        return self._pseudonym(kind, value)

    def scrub_text(self, text: str) -> str:
        """``text`` with every sensitive span replaced (cached per distinct string)."""
        if not text or self._keep(text):
            return text
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        if "user" in self.kinds:
            for m in _HOME_RE.finditer(text):
                self._learn_one("user", m.group(1))
        out = text
        for kind, pattern, group in _RULES:
            if kind not in self.kinds:
                continue
            if kind == "env":
                out = pattern.sub(self._env_sub, out)
            elif group == 0:
                out = pattern.sub(lambda m, k=kind: self._replace(k, m.group(0)), out)
            else:
                out = pattern.sub(lambda m, k=kind, g=group: self._sub_group(k, m, g), out)
        if self._known_re is not None:
            out = self._known_re.sub(lambda m: self._replace(self._known[m.group(0)], m.group(0)), out)
        if len(self._cache) > 1_000_000:
            self._cache.clear()
        self._cache[text] = out
        return out

    def _sub_group(self, kind: str, m: re.Match[str], group: int) -> str:
        start, end = m.span(group)
        value = m.group(group)
        if kind in ("host", "user"):
            replaced = ",".join(self._replace(kind, p) if p else p for p in value.split(","))
        else:
            replaced = self._replace(kind, value)
        whole = m.group(0)
        return whole[: start - m.start()] + replaced + whole[end - m.start() :]

    def _env_sub(self, m: re.Match[str]) -> str:
        name, value = m.group(1), m.group(2)
        if name in SAFE_ENV or PSEUDONYM_RE.fullmatch(value.strip("\"'")):
            return m.group(0)
        return f"{name}={self._replace('env', value)}"

    def scrub_value(self, value: str, key: str | None = None) -> str:
        """Scrub one string value; ``key`` (a JSON key) may mark it sensitive as a whole."""
        kind = key_kind(key) if key else None
        stripped = value.strip()
        if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
            try:
                parsed = json.loads(stripped)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict | list):
                return json.dumps(self.scrub_json(parsed), ensure_ascii=False)
        if (
            kind is not None
            and kind in self.kinds
            and stripped
            and not self._keep(stripped)
            and not PSEUDONYM_RE.fullmatch(stripped)
            and not re.fullmatch(r"[\d.eE+-]+|true|false|null", stripped)
        ):
            self.learn_value(kind, stripped)
            if kind == "path" and not re.search(r"[/\\]", stripped) and "." not in stripped:
                return self.scrub_text(value)  # "dir": "reports" is not a path worth hiding
            return self._replace(kind, stripped)
        return self.scrub_text(value)

    def scrub_json(self, obj: object, key: str | None = None) -> object:
        """A copy of a JSON value with keys and string values scrubbed."""
        if isinstance(obj, dict):
            return {self.scrub_text(str(k)): self.scrub_json(v, str(k)) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.scrub_json(v, key) for v in obj]
        if isinstance(obj, str):
            return self.scrub_value(obj, key)
        return obj

    def learn_json(self, obj: object, key: str | None = None) -> None:
        """Learn sensitive values from a JSON value (call before scrubbing related text)."""
        if isinstance(obj, dict):
            for k, v in obj.items():
                self.learn_json(v, str(k))
        elif isinstance(obj, list):
            for v in obj:
                self.learn_json(v, key)
        elif isinstance(obj, str):
            kind = key_kind(key) if key else None
            if kind in ("host", "user"):
                self.learn_value(kind, obj)
            self.learn(obj)
