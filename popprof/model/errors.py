"""Exceptions that carry a user-facing message and an exit code.

Every error a user can cause (bad input, bad usage, a missing SDK) is a
:class:`PopprofError`. The CLI prints its message as one line on stderr and
exits with its ``exit_code``; it never shows a traceback for these.
"""

from __future__ import annotations

import os

#: Control characters as they are written in Python strings, so a name cannot break a message's line.
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F)} | {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}


def display_path(path: object) -> str:
    """``path`` as it is safe to print on one line: bytes that are not UTF-8 as ``\\xff`` (not ``\\udcff``),
    control characters (a newline in a file name) as ``\\n`` / ``\\x1b``."""
    text = os.fspath(path) if isinstance(path, os.PathLike) else str(path)
    if isinstance(text, bytes):
        raw = text
    else:
        try:
            raw = os.fsencode(text)
        except UnicodeError:
            raw = text.encode("utf-8", "backslashreplace")
    return raw.decode("utf-8", "backslashreplace").translate(_CONTROLS)


class PopprofError(Exception):
    """Base class for expected, user-facing errors (exit code 2)."""

    exit_code = 2


class InputError(PopprofError):
    """An input file or directory cannot be read as a profile.

    The message should name the file, say what is wrong and what to do.
    """

    def __init__(self, path: object, problem: str, hint: str | None = None) -> None:
        self.path = str(path)
        self.problem = problem
        self.hint = hint
        text = f"{display_path(self.path)}: {problem}"
        if hint:
            text += f" ({hint})"
        super().__init__(text)

    def __reduce__(self) -> tuple:  # raised in worker processes too: unpickle with the same fields
        return (type(self), (self.path, self.problem, self.hint))


class UsageError(PopprofError):
    """Bad options or arguments."""


class OutputError(PopprofError):
    """An output path cannot be written (missing permission, a file where a directory is needed, disk full).

    The message names the output the user asked for, never a temporary file.
    """

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(
            f"{display_path(self.path)}: cannot write the output ({problem}); choose another path"
        )


class SdkMissingError(InputError):
    """The Poplar SDK's ``pva`` module is needed but cannot be imported."""

    def __init__(self, path: object) -> None:
        super().__init__(
            path,
            "reading this file needs the Poplar SDK's pva module, which cannot be imported",
            "source the SDK's enable script (e.g. `source poplar_sdk/enable`), or run "
            "`popprof export` where the SDK is installed and analyse the bundle anywhere",
        )


class MissingTableError(PopprofError, KeyError, AttributeError):
    """A table is needed but the profile's source does not provide it.

    It is an AttributeError too, so ``hasattr(profile, "steps")`` is False for an absent table.
    """

    def __init__(self, table: str, profile_name: str = "", reason: str = "") -> None:
        self.table = table
        what = f"profile {profile_name!r} has no {table!r} table" if profile_name else f"no {table!r} table"
        text = what + (f": {reason}" if reason else "")
        super().__init__(text)

    def __str__(self) -> str:  # KeyError would quote the message
        return self.args[0]


class NotEvaluated(Exception):  # noqa: N818 - a signal, not an error
    """A figure or rule cannot be computed from this profile; the message says what it needs.

    Raised by the trace helpers and metrics a rule reads; :func:`popprof.rules.check` reports it as
    "not evaluated" instead of a finding.
    """
