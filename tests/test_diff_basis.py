"""`diff` compares per profiler step (per run) when the two sides ran different numbers of them.

Real traces: fixtures/real/traces/ (from facebookresearch/HolisticTraceAnalysis tests/data, commit f4d0062c;
MIT licence in fixtures/real/traces/LICENSE-HolisticTraceAnalysis.txt): nccl_data.json.gz has 3 profiler
steps (ProfilerStep#4-6), two_ranks/rank-0.json.gz has 2 (ProfilerStep#551-552).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import popprof
from popprof.cli import main
from popprof.compare import diff, gate
from popprof.compare.baseline import dumps_baseline
from popprof.metrics import compute
from popprof.testing import synth

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"


@pytest.fixture(scope="module")
def nccl():
    return popprof.open(REAL / "nccl_data.json.gz")


def repeated(profile, times: int):
    """The same trace run ``times`` times back to back: steps renumbered, every total exactly ``times`` x."""
    events = profile.events
    names = events["name"].astype("str")
    shift = float((events["start_us"] + events["dur_us"].fillna(0)).max() - events["start_us"].min())
    steps = sorted({int(n.split("#")[1]) for n in names if n.startswith("ProfilerStep#")})
    copies = []
    for i in range(times):
        renamed = names.map(
            lambda n, i=i: (
                f"ProfilerStep#{int(n.split('#')[1]) + i * len(steps)}"
                if n.startswith("ProfilerStep#")
                else n
            )
        )
        copies.append(
            events.assign(
                name=renamed,
                start_us=events["start_us"] + i * shift,
                event_id=events["event_id"] + i * len(events),
                parent_id=events["parent_id"] + i * len(events),
            )
        )
    out = profile.copy()
    frame = pd.concat(copies, ignore_index=True)
    frame["name"] = frame["name"].astype("category")
    out.set_table("events", frame)
    return out


def test_real_traces_count_their_profiler_steps(nccl):
    assert compute(nccl, ["trace.profiler_step_count"]) == {"trace.profiler_step_count": 3.0}
    two = popprof.open(REAL / "two_ranks" / "rank-0.json.gz")
    assert compute(two, ["trace.profiler_step_count"])["trace.profiler_step_count"] == 2.0


def test_equal_step_counts_compare_totals_and_say_so(nccl):
    result = diff(nccl, nccl)
    basis = result.basis["trace"]
    assert basis.per is None and basis.base_count == basis.new_count == 3
    assert "as totals (both sides ran 3 profiler steps)" in basis.describe()
    events = result.metrics.set_index("name").loc["trace.event_count"]
    assert events["base"] == len(nccl.events)


def test_different_step_counts_compare_per_step(nccl):
    longer = repeated(nccl, 2)  # 6 steps, every additive total doubled
    result = diff(nccl, longer)
    assert result.basis["trace"].per == "profiler step"
    assert (result.basis["trace"].base_count, result.basis["trace"].new_count) == (3, 6)
    rows = result.metrics.set_index("name")
    assert rows.loc["trace.event_count", "base"] == pytest.approx(len(nccl.events) / 3)
    for name in ("trace.event_count", "trace.device_busy_us"):
        assert rows.loc[name, "status"] == "unchanged", name
    assert len(result.events) > 100 and (result.events["status"] == "unchanged").all()  # each op, per step
    step = result.events.set_index("name").loc[
        "ProfilerStep#*"
    ]  # the steps themselves, whatever their numbers
    assert step["base_count"] == step["new_count"] == 1
    assert gate(
        result,
        {"defaults": False, "budgets": {"trace.event_count": "+0", "trace.device_busy_us": "+0%"}},
        strict=True,
    ).passed
    # the totals really differ: that is what a totals basis would have flagged
    totals = compute(longer, ["trace.event_count"])["trace.event_count"]
    assert totals == 2 * len(nccl.events)


def test_one_side_without_steps_compares_totals(nccl):
    unstepped = nccl.copy()
    events = nccl.events[~nccl.events["name"].astype("str").str.startswith("ProfilerStep#")].copy()
    unstepped.set_table("events", events)
    basis = diff(nccl, unstepped).basis["trace"]
    assert basis.per is None and "base 3 profiler steps, new no profiler steps" in basis.describe()


def test_ipu_runs_compare_per_run():
    base = synth.make_profile(num_steps=300, num_liveness_steps=20, seed=8)
    runs, steps = base.runs, base.steps
    longer = base.copy()
    longer.set_table("runs", pd.concat([runs, runs.assign(run=runs["run"] + len(runs))], ignore_index=True))
    longer.set_table(
        "steps",
        pd.concat(
            [steps, steps.assign(run=steps["run"] + len(runs), step=steps["step"] + steps["step"].max() + 1)],
            ignore_index=True,
        ),
    )
    result = diff(base, longer)
    assert result.basis["execution"].per == "run"
    rows = result.metrics.set_index("name")
    for name in ("execution.total_cycles", "execution.step_count"):
        assert rows.loc[name, "status"] == "unchanged", name
    assert (result.programs["status"] == "unchanged").all()
    assert gate(result).passed


def test_the_cli_says_which_basis_in_every_format(nccl, tmp_path, capsys):
    from popprof.readers import bundle

    base = bundle.write(nccl, tmp_path / "base.popprof")
    new = bundle.write(repeated(nccl, 2), tmp_path / "new.popprof")
    assert main(["diff", str(base), str(new), "--no-gate"]) == 0
    text = " ".join(capsys.readouterr().out.split())  # laid out for 80 columns: long lines wrap
    assert "basis: trace figures per profiler step (base 3 profiler steps, new 6 profiler steps)" in text
    main(["diff", str(base), str(new), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["basis"]["trace"]["per"] == "profiler step" and doc["basis"]["trace"]["new"] == 6
    main(["diff", str(base), str(new), "--format", "markdown"])
    assert "> basis: trace figures per profiler step" in capsys.readouterr().out


def test_a_baseline_keeps_the_step_count_so_the_basis_holds(nccl, tmp_path):
    baseline = tmp_path / "baseline.json"
    baseline.write_text(dumps_baseline(nccl))
    result = popprof.diff(str(baseline), repeated(nccl, 2))
    assert result.basis["trace"].per == "profiler step"
    assert result.metrics.set_index("name").loc["trace.event_count", "status"] == "unchanged"
