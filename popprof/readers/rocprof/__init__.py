"""AMD rocprofiler-sdk JSON (``rocprofv3 --output-format json``) into event tables, as a GPU trace.

The file is one object, ``{"rocprofiler-sdk-tool": [ {metadata, agents, strings, kernel_symbols,
buffer_records, ...} ]}`` (one entry per profiled process), read whole (``.json`` or ``.json.gz``).

- ``buffer_records.kernel_dispatch``: kernels, device work on one track per (GPU agent, queue): ``pid`` is the
  GPU's index, ``tid`` and ``stream`` its queue, ``device`` ``gpu:N``, channel ``kernel``;
- ``buffer_records.memory_copy``: copies (channel ``gpu_memcpy``, named as Kineto names them, ``Memcpy HtoD``
  ...) on a track of their own per GPU;
- ``buffer_records.hip_api`` / ``hsa_api`` / ``marker_api`` / ``rccl_api``: host calls on their ``thread_id``
  in the process's ``pid`` (channel = the section's name);
- ``correlation_id.internal`` is ``events.correlation``: it joins a launch call to the work it caused.

Times are the records' nanoseconds as microseconds, absolute (as the Chrome reader keeps Kineto's). Modules:
:mod:`.document` loads and checks the file, :mod:`.columns` turns record lists into arrays, :mod:`.agents`
names the GPUs, :mod:`.reading` builds the Profile. See ``docs/readers.md``.
"""

from __future__ import annotations

import re
from pathlib import Path

FORMAT = "rocprof"

__all__ = ["FORMAT", "read", "sniff"]

#: the top-level key every rocprofiler-sdk tool JSON file opens with (whitespace allowed around it)
_OPENING = re.compile(rb'^\s*\{\s*"rocprofiler-sdk-tool"\s*:')


def sniff(path: Path, head: bytes) -> bool:
    """A JSON object whose first key is ``rocprofiler-sdk-tool`` (``head`` is already gunzipped)."""
    if path.is_dir():
        return False
    return _OPENING.match(head.removeprefix(b"\xef\xbb\xbf")) is not None


def read(path: Path, **options: object):  # noqa: ANN201 - the Profile, imported with pandas when reading
    """Read a rocprofiler-sdk JSON file into a Profile (see :func:`.reading.read`)."""
    from .reading import read as read_file

    return read_file(path, **options)
