"""Opening what a user names: a file, a bundle, a directory of per-rank traces or a run directory
(one profile per engine and per trace), and picking one profile of them."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from ..io.plural import plural
from ..model.errors import InputError
from .dispatch import read_file_all, read_path

if TYPE_CHECKING:  # the profile (pandas) is imported by the readers that make one
    from ..model.profile import Profile


def _run_directory_entries(path: Path) -> list[tuple[str, Path]]:
    """Engines, bundles and traces of a run directory (``autoReport.directory`` / ``PVTI_OPTIONS.directory``)."""
    from . import rundir

    return [(entry.name, entry.path) for entry in rundir.entries(path)]


def _is_bundle_dir(path: Path) -> bool:
    from .bundle import is_bundle

    return is_bundle(path)


class SkippedInputWarning(UserWarning):
    """A file of a directory that could not be read; the directory's other inputs were."""


def open_all(path: str | Path, *, config: dict | None = None, **options: object) -> dict[str, Profile]:
    """Open a file, a bundle, or a run directory: one Profile per engine (and per trace), by name.

    ``device_map`` (a mapping, JSON text or a JSON file) says which trace events are device activity;
    ``config`` (the ``[tool.popprof]`` table, see :func:`popprof.config.load_config`) supplies its
    ``device_map`` when none is given, as every command does.
    """
    path = Path(path)
    if options.get("device_map") is None and config and config.get("device_map"):
        options["device_map"] = config["device_map"]
    try:
        run_directory = path.is_dir() and not _is_bundle_dir(path)
    except OSError as exc:  # e.g. a name too long for the file system
        raise InputError(path, f"cannot access: {exc.strerror or exc}") from None
    if run_directory:
        # numpy and pandas: imported when a directory is opened, not with the face
        from . import rank_dir, xplane

        if not xplane.in_directory(path) and xplane.plugins_profile(path):  # a TensorBoard log directory
            return read_file_all(path, **options)  # its one XPlane file (the reader refuses several)

        if rank_dir.is_rank_directory(path):  # a directory of per-rank Chrome traces: one profile, every rank
            profile = rank_dir.read(path, **options)
            return {profile.name: profile}
        try:
            entries = _run_directory_entries(path)
        except OSError as exc:
            raise InputError(path, f"cannot list the directory: {exc.strerror or exc}") from None
        loose = not entries
        if loose:  # a directory of loose inputs (text summaries, logs, traces): every readable file
            entries = [
                (p.stem, p) for p in sorted(path.iterdir()) if p.is_file() and not p.name.startswith(".")
            ]
        profiles: dict[str, Profile] = {}
        skipped: list[str] = []
        for name, entry in entries:
            try:
                found = read_file_all(entry, **options) if loose else {name: read_path(entry, **options)}
            except InputError as exc:  # one unreadable input is reported and skipped, not the whole directory
                skipped.append(str(exc))
                continue
            for key, profile in found.items():
                key = key if loose else name
                profile.name = key if key not in profiles else f"{key}-{len(profiles)}"
                profiles[profile.name] = profile
        if not profiles:
            _refuse_bundle_without_manifest(path)
            detail = f"; {len(skipped)} unreadable: {skipped[0]}" if skipped else ""
            if not detail:
                detail = _traces_below(path)
            raise InputError(
                path,
                "directory holds no profile (no profile.pop, *.pvti, bundle manifest, Chrome trace "
                f"*.json / *.json.gz or other readable input){detail}",
            )
        for problem in skipped:
            warnings.warn(f"skipped: {problem}", SkippedInputWarning, stacklevel=2)
        return profiles
    return read_file_all(path, **options)


def _refuse_bundle_without_manifest(path: Path) -> None:
    """InputError when ``path`` holds Parquet files and no bundle manifest (a bundle that lost its manifest.json:
    its tables cannot be read without it), rather than naming the first Parquet file as an unknown format."""
    from .bundle import MANIFEST

    parquet = sorted(p.name for p in path.glob("*.parquet") if p.is_file())
    if parquet and not (path / MANIFEST).exists():
        raise InputError(
            path,
            f"a popprof bundle without its {MANIFEST} ({plural(len(parquet), 'Parquet file')}): "
            "its tables cannot be read",
            "export the bundle again",
        )


def _traces_below(path: Path) -> str:
    """A hint when ``path``'s subdirectories hold traces (HTA's ``trace_compare`` layout: ``base/``, ``test/``):
    each of them is a run, the parent none."""
    from . import rank_dir

    try:
        subs = sorted(p.name for p in path.iterdir() if p.is_dir() and rank_dir.is_rank_directory(p))
    except OSError:
        return ""
    if not subs:
        return ""
    more = f" and {len(subs) - 4} more" if len(subs) > 4 else ""
    return f"; its subdirectories {', '.join(subs[:4])}{more} hold traces: give one of them (each is a run)"


def open_profile(path: str | Path, engine: str | None = None, **options: object) -> Profile:
    """Open one Profile. For a run directory with several engines, ``engine`` picks one.

    Options go to the readers (``with_args``, ``device_map``, ``config``: see :func:`open_all`).
    """
    profiles = open_all(path, **options)
    if engine is not None:
        if engine not in profiles:
            raise InputError(path, f"no engine {engine!r}; found: {', '.join(profiles)}")
        return profiles[engine]
    if len(profiles) == 1:
        return next(iter(profiles.values()))
    raise InputError(
        path,
        f"holds several profiles ({', '.join(profiles)})",
        "pick one with engine=NAME (CLI: --engine NAME), or use popprof.open_all",
    )
