"""Gather what CMD left behind for ``popprof record``: reports, traces and the Poplar text in its output.

Files are found by name and age only (``profile.pop`` and ``*.pvti`` written since CMD
started), by :mod:`popprof.readers.rundir`, the discovery ``open_all`` uses; their content is
read exclusively through popprof's readers: :func:`popprof.open` for reports and traces, and,
for the saved stdout/stderr logs, every reader of the registry that claims the log (a log can
hold a Poplar summary and an out-of-memory message at once). Nothing here parses a format.
A file that cannot be read is noted, never fatal: a run that failed or was interrupted still
gives whatever it left.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..model.errors import InputError, PopprofError, SdkMissingError
from ..model.profile import Profile


@dataclass
class Collected:
    """Everything opened from one recording, and what could not be."""

    profiles: dict[str, Profile] = field(default_factory=dict)  # unique name -> profile
    reports: list[Path] = field(default_factory=list)  # profile.pop files CMD wrote
    traces: list[Path] = field(default_factory=list)  # .pvti files CMD wrote
    log_profiles: dict[str, list[str]] = field(default_factory=dict)  # log file name -> profile names read
    needs_sdk: list[Path] = field(default_factory=list)  # files not read because pva cannot be imported
    problems: list[str] = field(default_factory=list)  # one line per file that could not be read
    bundles: list[Path] = field(default_factory=list)

    def add(self, profile: Profile, name: str) -> str:
        """Keep ``profile`` under ``name`` (made unique with a numeric suffix); returns the name used."""
        unique, n = name, 2
        while unique in self.profiles:
            unique, n = f"{name}-{n}", n + 1
        profile.name = unique
        self.profiles[unique] = profile
        return unique


def sdk_available() -> bool:
    """Whether the Poplar SDK's ``pva`` module can be imported here."""
    try:
        import pva  # noqa: F401
    except Exception:  # ImportError, or the SDK's own RuntimeError when it is half set up
        return False
    return True


def find_reports(report_dir: Path, since: float) -> list[tuple[str, Path]]:
    """(engine name, path) of every ``profile.pop`` under ``report_dir`` written since ``since``
    (:func:`popprof.readers.rundir.reports`: ``training``; ``a-b`` for ``a/b``)."""
    from ..readers import rundir

    with contextlib.suppress(OSError):
        return [(entry.name, entry.path) for entry in rundir.reports(report_dir, since, bundles=False)]
    return []


def find_traces(trace_dir: Path, since: float) -> list[Path]:
    """Every ``.pvti`` in ``trace_dir`` (and one level below) written since ``since``."""
    from ..readers import rundir

    with contextlib.suppress(OSError):
        return [entry.path for entry in rundir.traces(trace_dir, since)]
    return []


def open_files(
    entries: Iterable[tuple[str, Path]],
    collected: Collected,
    sdk: bool,
    device_map: Mapping[str, str | None] | None = None,
) -> None:
    """Open each (name, path) with :func:`popprof.open` (traces under ``device_map``, the one every command
    uses); without the SDK only note that it needs it."""
    from ..readers import open_profile

    for name, path in entries:
        if not sdk:
            collected.needs_sdk.append(path)
            continue
        try:
            profile = open_profile(path, **({"device_map": device_map} if device_map else {}))
        except SdkMissingError:
            collected.needs_sdk.append(path)
        except PopprofError as exc:
            collected.problems.append(str(exc))
        else:
            collected.add(profile, name)


def read_log(path: Path, label: str, collected: Collected) -> None:
    """Read every kind of Poplar output the registry's readers find in the log ``path``.

    Each reader that claims the file contributes its profile(s), named
    ``LABEL.FORMAT`` (``stderr.oom_log``); a text with several Poplar summaries
    gives one profile per summary, ``LABEL.FORMAT.NAME`` with the reader's name
    for each (``stdout.text_summary.run_2``). A log with nothing recognised
    gives none.
    """
    from ..io import limits
    from ..io.files import read_head
    from ..readers import reader_modules

    try:
        if not path.is_file() or path.stat().st_size == 0:
            return
        if path.stat().st_size > limits.get("text-bytes"):
            _read_large_log(path, label, collected)
            return
        head = read_head(path)
    except (OSError, InputError) as exc:
        collected.problems.append(f"{path}: cannot read the log ({exc})")
        return
    names: list[str] = []
    for module in reader_modules():
        try:
            claimed = module.sniff(path, head)
        except Exception:  # a reader's sniff tripping over odd text is not a finding
            claimed = False
        if not claimed:
            continue
        fmt = getattr(module, "FORMAT", module.__name__.rsplit(".", 1)[-1])
        found = _read_all(module, path, collected)
        for name, profile in found.items():
            names.append(
                collected.add(profile, f"{label}.{fmt}" if len(found) == 1 else f"{label}.{fmt}.{name}")
            )
    collected.log_profiles[path.name] = names


def _read_large_log(path: Path, label: str, collected: Collected) -> None:
    """A log larger than ``text-bytes`` (a job that printed gigabytes after its out-of-memory message): the
    readers' streaming passes find its out-of-memory messages and summaries, in bounded memory."""
    from ..readers import oom_log, text_summary

    names: list[str] = []
    for fmt, read in (
        (text_summary.FORMAT, text_summary.read_all_streaming),
        (oom_log.FORMAT, lambda p: {"": profile} if (profile := oom_log.read_streaming(p)) else {}),
    ):
        try:
            found = read(path)
        except PopprofError as exc:
            collected.problems.append(str(exc))
            continue
        for name, profile in found.items():
            names.append(
                collected.add(profile, f"{label}.{fmt}" if len(found) == 1 else f"{label}.{fmt}.{name}")
            )
    collected.log_profiles[path.name] = names


def _read_all(module: object, path: Path, collected: Collected) -> dict[str, Profile]:
    """The profiles one reader finds in ``path``, by the reader's names (several for a log of several
    Poplar summaries, through the reader's ``read_all``); {} with a note when it cannot read it."""
    try:
        read_all = getattr(module, "read_all", None)
        if read_all is not None:
            return dict(read_all(path))
        profile = module.read(path)
        return {profile.name: profile}
    except PopprofError as exc:
        collected.problems.append(str(exc))
    except Exception as exc:  # malformed text is bad input, never a crash of the recording
        collected.problems.append(
            f"{path}: {getattr(module, 'FORMAT', 'reader')} could not read it ({type(exc).__name__}: {exc})"
        )
    return {}


def export_bundles(collected: Collected, names: Iterable[str], bundles_dir: Path) -> None:
    """Write each named profile as ``bundles_dir/NAME.popprof``; failures are noted, not fatal."""
    from ..readers import bundle

    for name in names:
        profile = collected.profiles[name]
        try:
            collected.bundles.append(bundle.write(profile, bundles_dir / f"{name}.popprof"))
        except PopprofError as exc:
            collected.problems.append(f"{name}: not exported ({exc})")
