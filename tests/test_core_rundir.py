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
