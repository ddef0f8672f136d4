"""The redaction policy: what to keep readable, what to drop, which scrubbers run.

Sources, later ones winning: built-in defaults, ``[tool.popprof.redact]`` from
the project configuration (``popprof.config.load_config``), a policy file
(``--policy FILE``: TOML with the same keys, at top level or under
``[redact]`` / ``[tool.popprof.redact]``), then ``--keep`` / ``--drop``.

Keys::

    keep = ["MyCompany::*", "re:^layer_[0-9]+$"]   # values kept readable (glob, or re: regex)
    drop = ["metadata.app", "table:operations", "column:events.args"]
    [scrub]                                         # switch scrubber families off (the leak scan still
    paths = true                                    # looks for them, so the redaction then fails)
    users = true ...
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..model.errors import InputError, UsageError
from .scrub import FAMILIES


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """A keep/drop pattern: ``re:REGEX`` or a shell glob, matched against the whole string."""
    if pattern.startswith("re:"):
        try:
            return re.compile(pattern[3:])
        except re.error as exc:
            raise UsageError(f"bad regular expression in pattern {pattern!r}: {exc}") from None
    return re.compile(fnmatch.translate(pattern))


@dataclass
class Policy:
    """What a redaction keeps, drops and scrubs. ``describe()`` goes into the manifest and report."""

    keep: list[str] = field(default_factory=list)
    drop: list[str] = field(default_factory=list)
    scrub: dict[str, bool] = field(default_factory=lambda: dict.fromkeys(FAMILIES, True))
    identifiers: bool = True
    source: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        unknown = set(self.scrub) - set(FAMILIES)
        if unknown:
            raise UsageError(f"unknown scrub families {sorted(unknown)}; known: {', '.join(FAMILIES)}")
        self.scrub = {**dict.fromkeys(FAMILIES, True), **{k: bool(v) for k, v in self.scrub.items()}}
        self._keep = [compile_pattern(p) for p in self.keep]

    @property
    def families(self) -> list[str]:
        """Scrubber families switched on."""
        return [f for f, on in self.scrub.items() if on]

    def keeps(self, value: str) -> bool:
        """True when the user asked to keep ``value`` readable."""
        return any(p.fullmatch(value) for p in self._keep)

    def drops(self, target: str) -> bool:
        """True when ``target`` (``table:NAME``, ``column:TABLE.COL`` or ``metadata.KEY``) is dropped."""
        return any(fnmatch.fnmatchcase(target, p) for p in self.drop)

    def merged(self, data: dict, origin: str, label: str | None = None) -> Policy:
        """A new policy with ``data`` (a policy table) applied on top of this one.

        ``origin`` names it in error messages; ``label`` (default ``origin``) is what the
        manifest records, so a policy file's path (which may hold a user name) is not written.
        """
        if not isinstance(data, dict):
            raise UsageError(f"{origin}: the redaction policy must be a table")
        known = {"keep", "drop", "scrub", "identifiers"}
        unknown = set(data) - known
        if unknown:
            raise UsageError(
                f"{origin}: unknown redaction policy keys {sorted(unknown)}; known: {sorted(known)}"
            )
        for name in ("keep", "drop"):
            if name in data and not (
                isinstance(data[name], list) and all(isinstance(x, str) for x in data[name])
            ):
                raise UsageError(f"{origin}: {name} must be a list of strings")
        scrub = data.get("scrub", {})
        if not isinstance(scrub, dict):
            raise UsageError(f"{origin}: scrub must be a table of family = true|false")
        return Policy(
            keep=self.keep + list(data.get("keep", [])),
            drop=self.drop + list(data.get("drop", [])),
            scrub={**self.scrub, **scrub},
            identifiers=bool(data.get("identifiers", self.identifiers)),
            source=self.source + [label or origin],
        )

    def describe(self) -> dict:
        """A JSON-safe description (recorded in the manifest and the report; holds no secrets)."""
        return {
            "keep": list(self.keep),
            "drop": list(self.drop),
            "scrub": dict(self.scrub),
            "identifiers": self.identifiers,
            "allowlist": "popprof built-in",
            "source": list(self.source),
        }


def load_policy_file(path: str | Path) -> dict:
    """Read a policy TOML file; returns its redaction table."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except OSError as exc:
        raise InputError(path, f"cannot read the policy file ({exc.strerror or exc})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(path, f"policy file is not valid TOML ({exc})") from None
    if "tool" in data and isinstance(data["tool"], dict):
        popprof = data["tool"].get("popprof", {})
        data = (
            popprof.get("redact", {}) if isinstance(popprof, dict) else popprof
        )  # merged() rejects a non-table
    elif "redact" in data:
        data = data["redact"]
    return data


def build_policy(
    policy_file: str | Path | None = None,
    keep: list[str] | tuple[str, ...] = (),
    drop: list[str] | tuple[str, ...] = (),
    use_config: bool = True,
) -> Policy:
    """The effective policy: defaults, project config, policy file, then command-line patterns."""
    policy = Policy()
    if use_config:
        try:
            from ..io.config import load_config
        except ImportError:
            load_config = None
        if load_config is not None:
            section = (load_config() or {}).get("redact")
            if section:
                policy = policy.merged(section, "[tool.popprof.redact]")
    if policy_file is not None:
        policy = policy.merged(load_policy_file(policy_file), str(policy_file), "policy file")
    if keep or drop:
        policy = policy.merged({"keep": list(keep), "drop": list(drop)}, "command line")
    return policy
