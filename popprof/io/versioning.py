"""Checks shared by popprof's own file formats (bundle manifest, baseline): format tag and version."""

from __future__ import annotations

import os

from ..model.errors import InputError


def check_format(
    document: object, path: str | os.PathLike[str], *, tag: str, what: str, supported: int
) -> int:
    """Return the document's ``format_version`` after checking its ``format`` tag and version.

    Raises InputError when the tag is wrong, the version is missing, or the
    version is newer than ``supported`` (this popprof is too old to read it).
    """
    if not isinstance(document, dict) or document.get("format") != tag:
        raise InputError(path, f'not a popprof {what} (no "format": "{tag}")')
    version = document.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise InputError(path, f"{what} has no integer format_version")
    if version > supported:
        raise InputError(
            path,
            f"{what} format version {version} is newer than this popprof supports ({supported})",
            "upgrade popprof: pip install -U popprof",
        )
    return version
