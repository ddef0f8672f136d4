"""Project configuration: ``[tool.popprof]`` in ``pyproject.toml``, or a whole ``popprof.toml``.

:func:`load_config` walks up from the current directory (or ``start``) and
uses the nearest directory that has a ``popprof.toml`` (whole file) or a
``pyproject.toml`` with a ``[tool.popprof]`` table; in one directory
``popprof.toml`` wins. A ``pyproject.toml`` without ``[tool.popprof]`` is
skipped. ``explicit`` (``--config FILE``) names the file instead.

Sub-tables: ``rules`` (``enable``, ``disable``, ``fail_on`` and rule
parameters such as ``"memory.headroom.warning" = 0.85``), ``gate``,
``device_map`` and ``redact`` (read by their own commands).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from ..model.errors import InputError

CONFIG_NAMES = ("popprof.toml", "pyproject.toml")


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
            tool = _read(project).get("tool", {})
            if isinstance(tool, dict) and "popprof" in tool:
                return project
    return None


def load_config(start: Path | None = None, explicit: Path | None = None) -> dict:
    """The popprof configuration as a dict (``{}`` when there is none).

    With ``explicit`` that file is read (a missing or invalid file is an
    :class:`InputError`); a ``pyproject.toml`` gives its ``[tool.popprof]``
    table, any other file its whole content.
    """
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise InputError(path, "config file not found", "check the --config path")
    else:
        found = find_config(start)
        if found is None:
            return {}
        path = found
    data = _read(path)
    if path.name == "pyproject.toml":
        tool = data.get("tool", {})
        section = tool.get("popprof", {}) if isinstance(tool, dict) else {}
        if not isinstance(section, dict):
            raise InputError(path, "[tool.popprof] must be a table")
        return section
    return data


def _read(path: Path) -> dict:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(path, f"invalid TOML ({exc})", "fix the file's syntax") from None
    except OSError as exc:
        raise InputError(path, f"cannot read the config file ({exc.strerror})") from None
