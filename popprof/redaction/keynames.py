"""Key names whose values are sensitive, and what a key's name says its value holds: shared by the
redactor (:mod:`.scrub`, :mod:`.redactor`, :mod:`.allowlist`) and the leak scan, so that neither imports
the other for it.

A JSON key or a column named one of these (after lower-casing and dropping every character that is
not a letter or digit: ``host_name`` -> ``hostname``) holds a value of that kind as a whole.
"""

from __future__ import annotations

import functools
import re

#: Normalised key names by the kind of value they hold.
KEYS_BY_KIND: dict[str, str] = {
    "host": "host hostname hosts hostnames node nodename nodes server servers machine machinename fqdn",
    "ip": "ip ipaddress ipaddr addr address",
    "user": "user username userid owner login author uid",
    "email": "email mail",
    "secret": "password passwd pwd token apitoken accesstoken authtoken secret apikey accesskey secretkey "
    "privatekey credentials credential auth authorization cookie session sessionid",
    "path": "cwd home homedir workdir directory dir path file filename filepath dataset datadir datapath "
    "checkpoint outputdir logdir",
}
#: JSON keys whose whole (string) value is sensitive, by normalised key -> kind.
SENSITIVE_KEYS: dict[str, str] = {key: kind for kind, keys in KEYS_BY_KIND.items() for key in keys.split()}


_NOT_KEY_CHAR = re.compile(r"[^a-z0-9]")


@functools.lru_cache(maxsize=4096)
def key_kind(key: str) -> str | None:
    """The detector kind a JSON key or column name makes its value (``hostname`` -> ``host``), or None."""
    norm = _NOT_KEY_CHAR.sub("", key.lower())
    kind = SENSITIVE_KEYS.get(norm)
    if kind is None and norm.endswith(("token", "password", "secret", "apikey")):
        kind = "secret"
    if kind is None and norm.endswith(("hostname", "host")):
        kind = "host"
    if kind is None and norm.endswith(("dir", "directory", "path", "file")):
        kind = "path"
    return kind


#: Every key :func:`key_kind` calls ``secret`` holds one of these (a cheap test before the normalising one).
_SECRET_HINT = re.compile(r"(?i)pass|pwd|tok|secr|key|auth|cred|cook|sess")


def is_secret_key(key: str) -> bool:
    """A key whose value is a secret whatever it looks like (``password``, ``api_key``, ``auth_token``)."""
    return _SECRET_HINT.search(key) is not None and key_kind(key) == "secret"


@functools.lru_cache(maxsize=4096)
def raw_key_names_a_secret(raw: bytes) -> bool:
    """:func:`is_secret_key` of a JSON key's raw bytes between its quotes (cached: keys repeat)."""
    return len(raw) < 64 and is_secret_key(raw.decode("utf-8", "surrogateescape"))


#: A value assigned to a secret keyword in free text (``password=55512345``, ``token: 0xbeef``):
#: replaced whatever it looks like, a number or a date included.
ASSIGNED_SECRET = re.compile(
    r"(?i)\b(?:password|passwd|pwd|token|secret|api[_-]?key|apikey|access[_-]?key|auth[_-]?token|"
    r"private[_-]?key|client[_-]?secret)\s*[=:]\s*[\"']?([^\s\"',;&}]+)"
)
