"""The redaction policy: what to keep readable, what to drop, which scrubbers run.

Sources, later ones winning: built-in defaults, ``[tool.popprof.redact]`` (or ``[redact]`` of a
``popprof.toml``) from the project's own configuration, a policy file (``--policy FILE``: TOML with
the same keys, at top level or under ``[redact]`` / ``[tool.popprof.redact]``), then ``--keep`` /
``--drop``. The project's configuration is the one at the root of the git repository the user is in
(outside a repository: the current directory's), never one found further up: a ``popprof.toml`` in
``/tmp``, a home directory or a shared parent is not applied to redaction. Every source that loosens
redaction (keeps values readable, switches a scrubber or identifiers off) is named in
:attr:`Policy.loosened`, which the command prints on stderr.

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

from ..io.files import read_option_file
from ..io.patterns import compile_bounded
from ..io.plural import plural
from ..model.errors import InputError, UsageError
from .scrub import FAMILIES


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """A keep/drop pattern: ``re:REGEX`` (through :func:`popprof.io.patterns.compile_bounded`: one line,
    exit 2, for a pattern that could take exponential time) or a shell glob, matched against the whole
    string."""
    if pattern.startswith("re:"):  # the user's own regex: refused when it could backtrack without end
        return compile_bounded(pattern[3:], f"redaction pattern {pattern!r}")
    return re.compile(fnmatch.translate(pattern))


@dataclass
class Policy:
    """What a redaction keeps, drops and scrubs. ``describe()`` goes into the manifest and report."""

    keep: list[str] = field(default_factory=list)
    drop: list[str] = field(default_factory=list)
    scrub: dict[str, bool] = field(default_factory=lambda: dict.fromkeys(FAMILIES, True))
    identifiers: bool = True
    source: list[str] = field(default_factory=list)
    #: One line per source that loosened redaction (said on stderr; never in an output).
    loosened: list[str] = field(default_factory=list)

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
        return bool(self._keep) and any(p.fullmatch(value) for p in self._keep)

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
        notes = _loosening(data, scrub, origin)
        return Policy(
            loosened=self.loosened + notes,
            keep=self.keep + list(data.get("keep", [])),
            drop=self.drop + list(data.get("drop", [])),
            scrub={**self.scrub, **scrub},
            identifiers=bool(data.get("identifiers", self.identifiers)),
            source=self.source + [label or origin],
        )

    def describe(self) -> dict:
        """A JSON-safe description (recorded in the manifest and the report). It holds no secrets:
        how many keep and drop patterns there were, never the patterns (a pattern, or a dropped
        key's name, can itself be what the user wants hidden)."""
        return {
            "keep": len(self.keep),
            "drop": len(self.drop),
            "scrub": dict(self.scrub),
            "identifiers": self.identifiers,
            "allowlist": "popprof built-in",
            "source": list(self.source),
        }


def load_policy_file(path: str | Path) -> dict:
    """Read a policy TOML file (:func:`popprof.io.files.read_option_file`: a regular file within the
    ``option-bytes`` limit, never a FIFO or a device); returns its redaction table."""
    path = Path(path)
    try:
        data = tomllib.loads(read_option_file(path, "policy file").decode("utf-8"))
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


def _loosening(data: dict, scrub: dict, origin: str) -> list[str]:
    """What a policy table loosens, in words (``--keep`` patterns, scrubbers or identifiers off)."""
    parts = []
    if data.get("keep"):
        parts.append(f"keeps {plural(len(data['keep']), 'pattern')} readable")
    off = sorted(k for k, v in scrub.items() if not v)
    if off:
        parts.append(f"switches the {', '.join(off)} {'scrubber' if len(off) == 1 else 'scrubbers'} off")
    if "identifiers" in data and not data["identifiers"]:
        parts.append("leaves identifiers unreplaced")
    return [f"the redaction policy from {origin} {' and '.join(parts)}"] if parts else []


def git_root(start: Path) -> Path | None:
    """The root of the git repository holding ``start`` (a directory with ``.git``), or None."""
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return None


def project_config(start: str | Path | None = None) -> Path | None:
    """The project configuration redaction may use: ``popprof.toml``, or a ``pyproject.toml`` with
    ``[tool.popprof]``, at the root of the git repository holding ``start`` (default: the current
    directory), or in ``start`` itself outside a repository. Never a file further up."""
    here = Path(start or Path.cwd()).resolve()
    directory = git_root(here) or here
    dedicated = directory / "popprof.toml"
    if dedicated.is_file():
        return dedicated
    project = directory / "pyproject.toml"
    if project.is_file():
        try:
            data = tomllib.loads(project.read_text("utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            return None  # not readable as a project config: nothing to apply
        tool = data.get("tool", {})
        if isinstance(tool, dict) and "popprof" in tool:
            return project
    return None


def build_policy(
    policy_file: str | Path | None = None,
    keep: list[str] | tuple[str, ...] = (),
    drop: list[str] | tuple[str, ...] = (),
    use_config: bool = True,
    start: str | Path | None = None,
    config_file: str | Path | None = None,
) -> Policy:
    """The effective policy: defaults, the project's own config (:func:`project_config`) or the
    ``config_file`` the user named (``--config FILE``: its ``[redact]`` table, or ``[tool.popprof.redact]``
    of a pyproject.toml, read instead of the project's), a policy file, then command-line patterns."""
    policy = Policy()
    if config_file is not None:
        from ..io.config import load_config

        section = load_config(explicit=Path(config_file)).get("redact")
        if section:
            policy = policy.merged(section, f"{config_file}", "--config [redact]")
    elif use_config:
        from ..io.config import load_config

        found = project_config(start)
        if found is not None:
            section = (load_config(explicit=found) or {}).get("redact")
            if section:
                policy = policy.merged(section, f"{found}", "[tool.popprof.redact]")
    if policy_file is not None:
        policy = policy.merged(load_policy_file(policy_file), str(policy_file), "policy file")
    if keep or drop:
        policy = policy.merged({"keep": list(keep), "drop": list(drop)}, "command line")
    return policy
