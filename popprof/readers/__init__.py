"""Readers: the only code that knows file formats. Detection by content, then extension.

Each reader module defines:

- ``FORMAT``: its name (``"bundle"``, ``"pop"``, ...), recorded as ``target.source_format``;
- ``sniff(path: Path, head: bytes) -> bool``: whether the file (or directory) is its
  format; ``head`` is the first bytes of the file, gunzipped when the file is gzip;
- ``read(path: Path, **options) -> Profile``: read it, raising
  :class:`~popprof.model.errors.InputError` with a clear message when it is not what it
  expects. Options a reader does not know are ignored.

This package is the readers' face: it hands on the names of the modules that do the work.

- :mod:`.registry`: ``READER_MODULES`` (detection order), ``reader_modules``, ``detect``;
- :mod:`.dispatch`: ``read_path``, ``read_with``, ``read_file_all`` (one input, its reader's
  failures as one InputError);
- :mod:`.opening`: ``open_all``, ``open_profile`` (files, bundles, rank and run directories).
"""

from __future__ import annotations

from .dispatch import read_file_all, read_path, read_with
from .opening import SkippedInputWarning, open_all, open_profile
from .registry import MAP_WHILE_READING, READER_MODULES, detect, reader_modules

__all__ = [
    "MAP_WHILE_READING",
    "READER_MODULES",
    "SkippedInputWarning",
    "detect",
    "open_all",
    "open_profile",
    "read_file_all",
    "read_path",
    "read_with",
    "reader_modules",
]
