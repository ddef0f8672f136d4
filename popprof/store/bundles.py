"""``store add --keep-bundle``: the run's bundle kept in the store, so ``popprof diff`` works on any stored run.

``STORE/bundles/month=YYYY-MM/<key>--<ingest>.popprof/`` holds the source bundle verbatim (a bundle source),
or the bundle popprof writes of the profile (a trace, a run directory, a text summary); a baseline JSON is
kept as ``<key>--<ingest>.baseline.json``. It is written before the catalogue row, like every other file of
the run, and removed with the run's other files by ``--replace``; ``store fsck`` reports kept bundles of no
live run. The views never read it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from ..model.profile import Profile
from ..readers import bundle as bundle_format
from .layout import Location

ROOT = "bundles"
BASELINE_SUFFIX = ".baseline.json"


def kept_name(month: str, key: str, ingest_id: str, baseline: bool) -> str:
    """The store-relative path of a run's kept bundle (a directory) or baseline (a file)."""
    suffix = BASELINE_SUFFIX if baseline else ".popprof"
    return f"{ROOT}/month={month}/{key}--{ingest_id}{suffix}"


def keep(location: Location, rel: str, profile: Profile, source: Path, baseline: bool) -> None:
    """Write the run's bundle (or baseline file) at ``rel``: the source verbatim when it is one, else written."""
    if baseline:
        location.write_bytes(rel, source.read_bytes())
        return
    origin = Path(str(profile.source)) if profile.source else source
    if origin.is_dir() and (origin / bundle_format.MANIFEST).is_file():
        _copy_tree(location, origin, rel)
        return
    with tempfile.TemporaryDirectory(prefix="popprof-keep-") as tmp:
        written = bundle_format.write(profile, Path(tmp) / "run.popprof")
        _copy_tree(location, written, rel)


def _copy_tree(location: Location, top: Path, rel: str) -> None:
    for path in sorted(top.rglob("*")):
        if path.is_file() and not path.is_symlink():
            location.write_bytes(f"{rel}/{path.relative_to(top).as_posix()}", path.read_bytes())


def remove(location: Location, rel: str) -> None:
    """Remove a kept bundle (every file under ``rel``) or baseline file."""
    for name in location.files(rel, "**/*") if not rel.endswith(BASELINE_SUFFIX) else [rel]:
        location.remove(name)
    if location.local:
        for folder in sorted(Path(location.path(rel)).glob("**/"), reverse=True):
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()


def kept(location: Location) -> dict[str, str]:
    """Every kept bundle or baseline file of the store: its store-relative path -> its ingest id."""
    out = {}
    for month in location.dirs(ROOT):
        for rel in location.files(f"{ROOT}/{month}", "*"):
            name = rel.rsplit("/", 1)[-1]
            stem = name.removesuffix(BASELINE_SUFFIX).removesuffix(".popprof")
            parts = stem.split("--")
            if len(parts) == 4:
                out[rel] = parts[3]
        for folder in location.dirs(f"{ROOT}/{month}"):
            parts = folder.removesuffix(".popprof").split("--")
            if len(parts) == 4:
                out[f"{ROOT}/{month}/{folder}"] = parts[3]
    return out
