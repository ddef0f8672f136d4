"""Project configuration: ``[tool.popprof]`` in ``pyproject.toml``, or a whole ``popprof.toml``.

:func:`load_config` walks up from the current directory (or ``start``) and
uses the nearest directory that has a ``popprof.toml`` (whole file) or a
``pyproject.toml`` with a ``[tool.popprof]`` table; in one directory
``popprof.toml`` wins. A ``pyproject.toml`` without ``[tool.popprof]`` is
skipped. ``explicit`` (``--config FILE``) names the file instead.

Sub-tables: ``rules`` (``enable``, ``disable``, ``fail_on`` and rule
parameters such as ``"memory.headroom.warning" = 0.85``), ``gate``,
``device_map``, ``pilot``, ``redact`` and ``trend`` (read by their own commands).

The file is read through the option-file checks (a regular file within ``option-bytes``:
never a FIFO or a device) and validated once, with types, when it is loaded
(:func:`validate`): a key of the wrong type, or a number that is not finite, is one line
naming the key and the file (exit 2), before any command uses it.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..model.errors import InputError

CONFIG_NAMES = ("popprof.toml", "pyproject.toml")


def _empty() -> Mapping[str, Any]:
    return {}


@dataclass(frozen=True, eq=False)
class Config(Mapping[str, Any]):
    """A loaded configuration: one typed field per sub-table, and the whole table as read.

    Loaded from a file (:func:`load_config`) it has been validated: ``rules`` holds ``enable``/``disable``
    (a pattern or a list), ``fail_on`` and rule parameters; ``gate`` the gate's limits; ``device_map`` a file
    name, JSON text or a table of category = regular expression; ``pilot`` numbers; ``redact`` and ``trend``
    their commands' tables. ``path`` is the file it came from. A mapping handed in from Python
    (``popprof.check(profile, config={...})``) is wrapped by :meth:`of` as it is, and each consumer checks the
    shape of its own table. It is also a read-only mapping of the table as read (``config["rules"]``,
    ``config.get("gate")``), so code written for the dict it replaces keeps working.
    """

    rules: Mapping[str, Any] = field(default_factory=_empty)
    gate: Mapping[str, Any] = field(default_factory=_empty)
    device_map: str | Mapping[str, str] | None = None
    pilot: Mapping[str, float] = field(default_factory=_empty)
    redact: Mapping[str, Any] = field(default_factory=_empty)
    trend: Mapping[str, Any] = field(default_factory=_empty)
    path: Path | None = None
    table: Mapping[str, Any] = field(default_factory=_empty, repr=False)

    @classmethod
    def from_table(cls, table: Mapping[str, Any], path: Path | None = None) -> Config:
        """The configuration of ``table`` (``[tool.popprof]`` or a whole ``popprof.toml``); not validated here."""
        return cls(
            rules=table.get("rules") or {},
            gate=table.get("gate") or {},
            device_map=table.get("device_map") or None,
            pilot=table.get("pilot") or {},
            redact=table.get("redact") or {},
            trend=table.get("trend") or {},
            path=path,
            table=dict(table),
        )

    @classmethod
    def of(cls, value: Config | Mapping[str, Any] | None) -> Config:
        """``value`` as a Config: itself, the empty one for ``None``, or a mapping wrapped as it is."""
        if isinstance(value, Config):
            return value
        return EMPTY if not value else cls.from_table(value)

    @property
    def fail_on(self) -> object:
        """``rules.fail_on`` (or ``fail-on``), ``None`` when not set."""
        return (
            self.rules.get("fail_on", self.rules.get("fail-on")) if isinstance(self.rules, Mapping) else None
        )

    def __getitem__(self, key: str) -> Any:
        return self.table[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.table)

    def __len__(self) -> int:
        return len(self.table)


#: No configuration.
EMPTY = Config()


def find_config(start: Path | None = None) -> Path | None:
    """The config file that applies from ``start`` (default: the current directory), or ``None``."""
    here = Path(start or Path.cwd()).resolve()
    if here.is_file():
        here = here.parent
    for directory in (here, *here.parents):
        dedicated = directory / "popprof.toml"
        if dedicated.is_file():
            return dedicated
        project = directory / "pyproject.toml"
        if project.is_file():
            tool = _read(project).get("tool", {})  # the option-file checks: a FIFO here never blocks
            if isinstance(tool, dict) and "popprof" in tool:
                return project
    return None


def load_config(start: Path | None = None, explicit: Path | None = None) -> Config:
    """The popprof configuration, validated (:data:`EMPTY`, which reads as ``{}``, when there is none).

    With ``explicit`` that file is read (a missing or invalid file is an
    :class:`InputError`); a ``pyproject.toml`` gives its ``[tool.popprof]``
    table, any other file its whole content.
    """
    if explicit is not None:
        path = Path(explicit)
        if not path.exists():
            raise InputError(path, "config file not found", "check the --config path")
    else:
        found = find_config(start)
        if found is None:
            return EMPTY
        path = found
    data = _read(path)
    prefix = ""
    if path.name == "pyproject.toml":
        tool = data.get("tool", {})
        section = tool.get("popprof", {}) if isinstance(tool, dict) else {}
        if not isinstance(section, dict):
            raise InputError(path, "[tool.popprof] must be a table")
        data, prefix = section, "tool.popprof."
    validate(data, path, prefix)
    return Config.from_table(data, path)


def _read(path: Path) -> dict:
    from .files import read_option_file

    data = read_option_file(path, "config file")
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError(path, "the config file is not UTF-8 text", "fix the file's encoding") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(path, f"invalid TOML ({exc})", "fix the file's syntax") from None
    except RecursionError:
        raise InputError(path, "invalid TOML (nested too deeply)", "fix the file's syntax") from None


# -- validation -----------------------------------------------------------------------------------------

_KINDS = {
    str: "a string",
    bool: "true/false",
    int: "an integer",
    float: "a number",
    list: "a list",
    dict: "a table",
}


class ConfigTypeError(InputError):
    """A configuration key holds a value of the wrong type (or a number that is not finite)."""


def _kind(value: object) -> str:
    return _KINDS.get(type(value), type(value).__name__)


def _bad(path: Path, key: str, value: object, expected: str) -> ConfigTypeError:
    shown = repr(value) if not isinstance(value, dict | list) or len(repr(value)) < 60 else _kind(value)
    return ConfigTypeError(
        path, f"config key {key} is {_kind(value)} {shown}, expected {expected}", "fix the config file"
    )


def _scalar(path: Path, key: str, value: object) -> None:
    """A parameter value: a string, true/false, or a finite number."""
    if isinstance(value, float) and not math.isfinite(value):
        raise _bad(path, key, value, "a finite number")
    if not isinstance(value, str | bool | int | float):
        raise _bad(path, key, value, "a number, a string or true/false")


def _strings(path: Path, key: str, value: object) -> None:
    """One pattern or a list of patterns."""
    if isinstance(value, str):
        return
    if not isinstance(value, list):
        raise _bad(path, key, value, "a string or a list of strings")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise _bad(path, f"{key}[{index}]", item, "a string")


def _table(path: Path, key: str, value: object) -> Mapping:
    if not isinstance(value, dict):
        raise _bad(path, key, value, "a table")
    return value


def _parameters(path: Path, key: str, table: Mapping) -> None:
    """Rule or gate parameters: scalars, lists of scalars, or tables of those (``[rules."exchange.phases"]``)."""
    for name, value in table.items():
        where = f"{key}.{name}"
        if isinstance(value, dict):
            _parameters(path, where, value)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, dict):
                    _parameters(path, f"{where}[{index}]", item)
                else:
                    _scalar(path, f"{where}[{index}]", item)
        else:
            _scalar(path, where, value)


def validate(config: Mapping, path: Path, prefix: str = "") -> None:
    """ConfigTypeError (one line naming the key and ``path``) for the first key of the wrong type.

    ``rules``: ``enable``/``disable`` a pattern or a list of them, ``fail_on`` a string, every other
    entry a parameter (a finite number, a string, true/false, or a table of those). ``gate``: a table,
    ``strict``/``defaults`` true/false, its limits numbers, strings or tables. ``device_map``: a file name
    or JSON text, or a table of category = "regular expression". ``pilot``: a table of numbers.
    ``redact``: a table (its own command checks its keys). ``trend``: ``exact``/``noisy`` a pattern or a
    list of them, ``budgets`` a table of limits (as the gate's). Unknown keys are left alone.
    """
    rules = config.get("rules")
    if rules is not None:
        rules = _table(path, f"{prefix}rules", rules)
        for name, value in rules.items():
            where = f"{prefix}rules.{name}"
            if name in ("enable", "disable"):
                _strings(path, where, value)
            elif name in ("fail_on", "fail-on"):
                if not isinstance(value, str):
                    raise _bad(path, where, value, "a string (info, warning, error or never)")
            elif isinstance(value, dict):
                _parameters(path, where, value)
            else:
                _parameters(path, f"{prefix}rules", {name: value})
    gate = config.get("gate")
    if gate is not None:
        gate = _table(path, f"{prefix}gate", gate)
        for name in ("strict", "defaults"):
            if name in gate and not isinstance(gate[name], bool):
                raise _bad(path, f"{prefix}gate.{name}", gate[name], "true/false")
        _parameters(path, f"{prefix}gate", {k: v for k, v in gate.items() if k not in ("strict", "defaults")})
    device_map = config.get("device_map")
    if device_map is not None and not isinstance(device_map, str):
        device_map = _table(path, f"{prefix}device_map", device_map)
        for name, value in device_map.items():
            if not isinstance(value, str):
                raise _bad(path, f"{prefix}device_map.{name}", value, 'a regular expression string (or "")')
    pilot = config.get("pilot")
    if pilot is not None:
        for name, value in _table(path, f"{prefix}pilot", pilot).items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise _bad(path, f"{prefix}pilot.{name}", value, "a finite number")
    if config.get("redact") is not None:
        _table(path, f"{prefix}redact", config["redact"])
    trend = config.get("trend")
    if trend is not None:
        trend = _table(path, f"{prefix}trend", trend)
        for name in ("exact", "noisy"):
            if name in trend:
                _strings(path, f"{prefix}trend.{name}", trend[name])
        if "budgets" in trend:
            _parameters(
                path, f"{prefix}trend.budgets", _table(path, f"{prefix}trend.budgets", trend["budgets"])
            )
