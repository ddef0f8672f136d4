"""A run directory opens as one Profile per engine, with the traces alongside."""

from __future__ import annotations

import shutil

import pytest

import popprof
from popprof.model.errors import InputError


def test_engines_and_traces_of_a_run_directory(tmp_path, fixtures_dir, pva_double):
    run = tmp_path / "reports"
    shutil.copytree(fixtures_dir / "run_dir", run)
    trace = next((fixtures_dir / "traces").glob("*.pvti"))
    shutil.copy(trace, run / trace.name)
    profiles = popprof.open_all(run)
    assert set(profiles) == {"training", "inference", trace.stem}
    assert profiles["training"].source_format == "pop" and profiles["training"].has("tiles", "steps")
    assert profiles[trace.stem].source_format == "pvti" and profiles[trace.stem].has("events")
    assert popprof.open(run, engine="inference").name == "inference"
    with pytest.raises(InputError, match="holds several profiles"):
        popprof.open(run)
    with pytest.raises(InputError, match="no engine 'nope'"):
        popprof.open(run, engine="nope")


def _layout(root):
    """A run directory by names only: engines at the top, one and two levels down, a hidden one, traces."""
    for where in ("", "training", "framework/inference", ".cache", "a/b/c"):
        (root / where).mkdir(parents=True, exist_ok=True)
        (root / where / "profile.pop").write_bytes(b"x")
    for where in ("host.pvti", "training/ipu.pvti", "a/b/deep.pvti"):
        (root / where).write_bytes(b"x")
    return root


def test_one_discovery_names_engines_and_traces(tmp_path):
    from popprof.readers import rundir

    root = _layout(tmp_path / "run")
    found = [(e.name, e.path.relative_to(root).as_posix(), e.kind) for e in rundir.entries(root)]
    assert found == [
        ("run", "profile.pop", "report"),
        ("training", "training/profile.pop", "report"),
        ("framework-inference", "framework/inference/profile.pop", "report"),
        ("host", "host.pvti", "trace"),
        ("ipu", "training/ipu.pvti", "trace"),
    ]  # .cache is hidden; a/b/c and a/b/deep.pvti are deeper than Poplar and frameworks write


def test_record_collects_what_open_all_discovers_written_since_the_run(tmp_path):
    import os

    from popprof.readers import rundir
    from popprof.record.collect import find_reports, find_traces

    root = _layout(tmp_path / "run")
    since = os.stat(root / "training" / "profile.pop").st_mtime
    old = since - 3600
    os.utime(root / "profile.pop", (old, old))  # left by an earlier run
    reports = find_reports(root, since)
    assert reports == [(e.name, e.path) for e in rundir.reports(root) if e.path != root / "profile.pop"]
    assert find_traces(root, since) == [e.path for e in rundir.traces(root)]
    assert find_reports(tmp_path / "missing", since) == [] and find_traces(tmp_path / "missing", since) == []


def test_open_all_names_bundles_of_a_run_directory_by_their_path(tmp_path):
    from popprof.readers import bundle
    from popprof.testing import synth

    profile = synth.make_profile(num_ipus=1, num_steps=4, num_liveness_steps=4, seed=1)
    bundle.write(profile, tmp_path / "run" / "training")
    shutil.copytree(tmp_path / "run" / "training", tmp_path / "run" / "framework" / "inference")
    profiles = popprof.open_all(tmp_path / "run")
    assert sorted(profiles) == ["framework-inference", "training"]
    assert profiles["training"].has("tiles")
