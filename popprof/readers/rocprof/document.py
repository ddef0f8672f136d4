"""Loading a rocprofiler-sdk JSON file and checking its shape: every failure is one InputError line."""

from __future__ import annotations

from pathlib import Path

import orjson

from ...io import bounded
from ...io.files import open_json
from ...io.jsonwords import DAMAGED_HINT, JSON_KINDS, json_kind, json_parse_problem
from ...model.errors import InputError

TOOL_KEY = "rocprofiler-sdk-tool"
#: The hint of a file that holds other JSON than rocprofv3's
_SHAPE = "expected rocprofv3 JSON output: an object holding a rocprofiler-sdk-tool list"


def load(path: Path) -> dict:
    """The tool section of the file (the first process's): parsed whole, within ``text-bytes``.

    Raises InputError for JSON that does not parse (cut off: it ends inside the value; or malformed inside),
    gzip cut off, or a document that is not a rocprofiler-sdk tool object.
    """
    with open_json(path) as handle:
        data = bounded.read_limited(handle, path, "text-bytes")
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InputError(path, *json_parse_problem(exc)) from None
    del data
    if not isinstance(document, dict) or not isinstance(document.get(TOOL_KEY), list):
        raise InputError(path, f"no '{TOOL_KEY}' list at the top of the JSON", _SHAPE)
    sections = document[TOOL_KEY]
    if not sections:
        raise InputError(path, f"'{TOOL_KEY}' is empty: the tool wrote no process", _SHAPE)
    if len(sections) > 1:
        raise InputError(
            path,
            f"'{TOOL_KEY}' holds {len(sections)} processes; popprof reads one per file",
            "write one file per process (rocprofv3 does by default: -o %hostname%/%pid%)",
        )
    tool = sections[0]
    if not isinstance(tool, dict):
        raise InputError(path, f"'{TOOL_KEY}[0]' is {json_kind(tool)}, not an object", DAMAGED_HINT)
    for key, kind in (("buffer_records", dict), ("agents", list)):
        value = tool.get(key)
        if key not in tool:
            raise InputError(path, f"'{TOOL_KEY}[0]' has no {key}", _SHAPE)
        if not isinstance(value, kind):
            raise InputError(
                path, f"'{TOOL_KEY}[0].{key}' is {json_kind(value)}, not {JSON_KINDS[kind]}", DAMAGED_HINT
            )
    return tool


def section(path: Path, tool: dict, key: str, kind: type) -> object:
    """``tool[key]`` when it is a ``kind``, an empty one when absent; InputError when it is something else."""
    value = tool.get(key)
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise InputError(path, f"'{key}' is {json_kind(value)}, not {JSON_KINDS[kind]}", DAMAGED_HINT)
    return value
