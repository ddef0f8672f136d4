"""popprof pilot: every figure is the one summary / the per-device API gives; missing is missing; exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from popprof.cli import main
from popprof.metrics import account, compute
from popprof.metrics.devices import device_breakdown
from popprof.metrics.ranks import step_times as rank_step_times
from popprof.metrics.steps import step_stats, step_times
from popprof.metrics.summary import summarise
from popprof.model.errors import UsageError
from popprof.model.profile import Profile
from popprof.pilot import DEFAULT_THRESHOLDS, diagnose, pilot, side, thresholds_from
from popprof.readers import open_all
from popprof.rules import check

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
TRACES = FIX / "real" / "traces"
HTA = json.loads((TRACES / "hta_reference.json").read_text())


def one(path: Path):
    return next(iter(open_all(path).values()))


@pytest.fixture(scope="module")
def ipu():
    return one(FIX / "mk2_training.popprof")


@pytest.fixture(scope="module")
def pod4():
    return one(FIX / "pod4_pipeline.popprof")


@pytest.fixture(scope="module")
def gpu():
    return one(TRACES / "nccl_data.json.gz")


@pytest.fixture(scope="module")
def ranks():
    return one(TRACES / "two_ranks")


def value(column: dict, key: str):
    return column["figures"][key]["value"]


@pytest.mark.parametrize("name", ["ipu", "pod4", "gpu", "ranks"])
def test_device_shares_are_the_time_account(request, name):
    """The pilot's device shares are the time account's run rows pooled over devices, as summary's
    "What limits this run", trace.device_idle_share and trace.device_communication_share."""
    profile = request.getfixturevalue(name)
    col = side(profile, "x", role="ipu")
    runs = account.run_account(profile)
    window = runs["window_us"].sum()
    assert value(col, "devices") == len(runs)
    assert value(col, "compute_pct") == pytest.approx(100 * runs["compute"].sum() / window)
    idle = sum(account.idle_us(r) for _, r in runs.iterrows())
    comm = sum(account.communication_us(r) for _, r in runs.iterrows())
    assert value(col, "busy_pct") == pytest.approx(100 * (1 - idle / window))
    assert value(col, "communication_pct") == pytest.approx(100 * comm / window)
    if col["platform"] == "gpu":
        assert value(col, "idle_host_pct") == pytest.approx(100 * runs["idle_host"].sum() / window)
        values = compute(profile)
        assert value(col, "busy_pct") == pytest.approx(100 * (1 - values["trace.device_idle_share"]))


def test_gpu_shares_are_not_htas_window_but_hta_keeps_its_own(gpu):
    """A single-rank trace: HTA 0.5.0's temporal breakdown (its iteration window, without the last
    ProfilerStep) stays in the HTA device table; the pilot reads the account (every step)."""
    reference = HTA["runs"]["nccl_data"]["ranks"]["0"]
    devices = device_breakdown(gpu, hta=True)  # HTA's own times (rounded to whole microseconds)
    assert devices["idle_pct"].iloc[0] == pytest.approx(reference["idle_pct"], abs=0.01)
    col = side(gpu, "gpu", role="baseline")
    run = account.run_account(gpu).iloc[0]
    assert 100 - value(col, "busy_pct") == pytest.approx(100 * account.idle_us(run) / run["window_us"])


def test_ipu_memory_and_sync_are_the_summary_figures(ipu):
    col = side(ipu, "ipu", role="ipu")
    memory = summarise(ipu)["memory"]
    assert value(col, "memory_utilisation") == memory["max_tile_utilisation"]
    assert value(col, "memory_headroom_bytes") == memory["max_tile_headroom_bytes"]
    assert value(col, "tiles_out_of_memory") == memory["tiles_out_of_memory"]
    assert value(col, "peak_liveness_bytes") == memory["peak_liveness_bytes"]
    assert value(col, "sync_pct") == pytest.approx(
        100 * summarise(ipu)["execution"]["by_category"]["sync"]["share"]
    )


def test_ipu_step_times_are_the_runs(ipu):
    runs = ipu.runs.sort_values("run")
    dur = (runs["end_us"] - runs["start_us"]).to_numpy()
    col = side(ipu, "ipu", role="ipu", warmup_steps=1)
    assert col["step_source"] == "runs"
    assert value(col, "warmup_mean_us") == pytest.approx(dur[0])
    assert value(col, "step_p50_us") == pytest.approx(np.median(dur[1:]))
    assert value(col, "step_count") == len(dur) - 1


def test_ipu_step_times_from_cycles_without_runs(pod4):
    """Without run wall-clock times a step is the run's cycles on its busiest IPU over the clock."""
    tables = dict(pod4.tables, runs=pod4.runs.assign(start_us=np.nan))
    times = step_times(Profile("no-wall-clock", tables))
    steps = pod4.steps
    busiest = steps.groupby(["run", "ipu"])["cycles"].sum().groupby(level=0).max().to_numpy(dtype=float)
    assert times["source"].iloc[0] == "steps.cycles"
    assert times["dur_us"].to_numpy() == pytest.approx(busiest * 1e6 / pod4.target_value("clock_hz"))


def test_gpu_step_times_are_the_profiler_steps(gpu, ranks):
    marks = rank_step_times(gpu)["dur_us"].to_numpy()
    col = side(gpu, "gpu", role="baseline", warmup_steps=1)
    assert col["step_source"] == "ProfilerStep"
    assert value(col, "step_count") == len(marks) - 1
    assert value(col, "step_p90_us") == pytest.approx(np.percentile(marks[1:], 90))
    assert value(col, "step_max_us") == pytest.approx(marks[1:].max())
    # with several ranks a step lasts as long as its slowest rank
    both = rank_step_times(ranks)
    slowest = both.groupby("step")["dur_us"].max().to_numpy()
    stats = step_stats(step_times(ranks), 0)
    assert stats["max_us"] == pytest.approx(slowest.max())
    assert stats["count"] == len(slowest)


def test_throughput_samples_per_second(ipu, ranks):
    col = side(ipu, "ipu", role="ipu", batch_size=16, warmup_steps=1)
    replicas = int(ipu.target_value("num_replicas"))
    runs = ipu.runs.sort_values("run")
    steady = (runs["end_us"] - runs["start_us"]).to_numpy()[1:]
    assert col["figures"]["throughput"]["unit"] == "samples/s"
    assert value(col, "throughput") == pytest.approx(len(steady) * 16 * replicas / (steady.sum() / 1e6))
    gpu_col = side(ranks, "gpu", role="baseline", samples=64, warmup_steps=0)
    total = step_stats(step_times(ranks), 0)["total_us"]
    assert value(gpu_col, "throughput") == pytest.approx(value(gpu_col, "step_count") * 64 / (total / 1e6))
    plain = side(ipu, "ipu", role="ipu")
    assert plain["figures"]["throughput"]["unit"] == "steps/s"


def test_missing_figures_are_missing_never_zero(ipu, gpu):
    g = side(gpu, "gpu", role="baseline")
    i = side(ipu, "ipu", role="ipu")
    for key in (
        "memory_utilisation",
        "peak_liveness_bytes",
        "peak_allocated_bytes",
        "sync_pct",
        "compile_time_us",
    ):
        assert value(g, key) is None and g["figures"][key]["missing"]
    assert value(i, "idle_host_pct") is None
    assert i["figures"]["idle_host_pct"]["missing"].startswith("not split on IPUs")
    assert "profile_memory=True" in g["figures"]["peak_allocated_bytes"]["missing"]
    for col in (g, i):
        for entry in col["figures"].values():
            assert (entry["value"] is None) == (entry["missing"] is not None)


def test_findings_are_check_by_rule(ipu, gpu):
    doc = pilot([("ipu", ipu)], [("gpu", gpu)])
    for col, profile in zip(doc["columns"], (ipu, gpu), strict=True):
        items = check(profile).items
        assert col["findings"] == {
            r: {
                "count": sum(f.rule_id == r for f in items),
                "severity": min(
                    (f.severity for f in items if f.rule_id == r), key=["error", "warning", "info"].index
                ),
            }
            for r in {f.rule_id for f in items}
        }
    assert set(doc["rules"]) == set(doc["columns"][0]["findings"]) | set(doc["columns"][1]["findings"])


def test_text_summary_shares_are_the_summary_shares():
    profile = one(FIX / "real" / "poplar" / "examples_tut7_execution_sdk1_mk1.txt")
    col = side(profile, "text", role="ipu")
    m = compute(profile)
    assert col["shares_source"] == "time_account"  # the account of a summary: its own tile averages
    assert value(col, "compute_pct") == pytest.approx(100 * m["execution.summary_share.compute"])
    assert value(col, "sync_pct") == pytest.approx(100 * m["execution.summary_share.sync"])
    assert value(col, "step_p50_us") is None


def test_diagnosis_order_and_thresholds(ipu):
    oom = one(FIX / "real" / "poplar" / "tutorials_tut4_oom_message_mk2.txt")
    assert side(oom, "oom", role="ipu")["diagnosis"]["limit"] == "does not fit (memory)"
    col = side(ipu, "ipu", role="ipu")
    assert col["diagnosis"]["limit"] == "device compute"  # the account's limit: compute 76.0 % of the run
    assert 100 * col["diagnosis"]["deciding"]["share"] == pytest.approx(value(col, "compute_pct"))
    assert (
        col["diagnosis"]["text"]
        == "device compute, 76.0 % of the window; then data movement 23.0 %, load imbalance 0.8 %"
    )
    # memory first: the same figures over a lower does-not-fit threshold
    util = value(col, "memory_utilisation")
    tighter = diagnose(
        col["figures"], 0, dict(DEFAULT_THRESHOLDS, does_not_fit_utilisation=util), {"limit": "x"}
    )
    assert tighter["limit"] == "does not fit (memory)" and tighter["thresholds"] == {
        "does_not_fit_utilisation": util
    }
    assert diagnose({})["limit"] == "undetermined"  # no account, no limit


def test_thresholds_from_config_and_set():
    limits = thresholds_from(
        {"pilot": {"does_not_fit_utilisation": 0.9}}, {"does_not_fit_utilisation": "0.8"}
    )
    assert limits == {"does_not_fit_utilisation": 0.8}  # --set wins over the file
    with pytest.raises(UsageError):
        thresholds_from({}, {"nope": 1})
    # the old name read as the host blocked on device, the opposite wait: told the new one, never taken
    for config, sets in (({"pilot": {"host_wait_pct": 25}}, None), ({}, {"host_wait_pct": "25"})):
        with pytest.raises(UsageError, match="'host_wait_pct' is now 'idle_host_pct'.*not the host blocked"):
            thresholds_from(config, sets)
    # the first-match thresholds of schema version 2 are refused with the reason, never silently ignored
    for name in ("idle_host_pct", "idle_pct", "data_movement_pct", "compute_pct"):
        with pytest.raises(
            UsageError, match=f"'{name}' is retired: the diagnosis now names the largest part"
        ):
            thresholds_from({"pilot": {name: 25}})
    with pytest.raises(UsageError):
        thresholds_from({"pilot": {"does_not_fit_utilisation": "lots"}})


# -- CLI ---------------------------------------------------------------------


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_json_columns_and_schema(capsys):
    code, out, _ = run(
        capsys,
        "pilot",
        FIX / "mk2_training.popprof",
        FIX / "pod4_pipeline.popprof",
        "--label-ipu",
        "1xIPU",
        "--label-ipu",
        "4xIPU",
        "--baseline",
        TRACES / "two_ranks",
        "--batch-size",
        "8",
        "--format",
        "json",
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == "popprof.pilot" and doc["schema_version"] == 3
    assert [c["label"] for c in doc["columns"]] == ["1xIPU", "4xIPU", "two_ranks"]
    assert [c["platform"] for c in doc["columns"]] == ["ipu", "ipu", "gpu"]
    assert doc["columns"][1]["figures"]["devices"]["value"] == 4
    assert doc["columns"][2]["figures"]["devices"]["value"] == 2


def test_cli_text_markdown_and_html(capsys, tmp_path):
    out_html = tmp_path / "pilot.html"
    code, out, err = run(
        capsys,
        "pilot",
        FIX / "mk2_training.popprof",
        "--baseline",
        FIX / "mk2_oom.popprof",
        "--format",
        "markdown",
        "-o",
        out_html,
    )
    assert code == 0
    assert out.startswith("## popprof pilot") and "| compute |" in out
    assert "does not fit (memory)" in out
    html = out_html.read_text()
    assert (
        html.count('class="grid"') == 2
        and html.count('class="stack"') == 1
        and "http" not in html.split("<body>")[1].replace("http-equiv", "")
    )
    code, out, _ = run(capsys, "pilot", FIX / "mk2_training.popprof", "--baseline", FIX / "mk2_oom.popprof")
    assert code == 0 and "Diagnosis" in out and "not in this profile: capture" in out


@pytest.mark.parametrize(
    "args, words",
    [
        (["--batch-size", "0"], "--batch-size"),
        (["--batch-size", "x"], "--batch-size"),
        (["--samples-per-step", "-3"], "--samples-per-step"),
        (["--batch-size", "2", "--samples-per-step", "4"], "not both"),
        (["--warmup-steps", "-1"], "--warmup-steps"),
        (["--set", "nope=1"], "unknown pilot threshold"),
        (["--label-ipu", "a", "--label-ipu", "b"], "--label-ipu"),
    ],
)
def test_cli_bad_usage_is_one_line_exit_2(capsys, args, words):
    code, out, err = run(
        capsys, "pilot", FIX / "mk2_training.popprof", "--baseline", FIX / "mk2_oom.popprof", *args
    )
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and words in err


def test_cli_wrong_kind_of_input_is_one_line_exit_2(capsys):
    code, out, err = run(
        capsys, "pilot", TRACES / "amd_mi250_minitoy.json.gz", "--baseline", FIX / "mk2_oom.popprof"
    )
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "is not an IPU run" in err
    code, _, err = run(
        capsys, "pilot", FIX / "mk2_training.popprof", "--baseline", FIX / "no-such-trace.json"
    )
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_pvti_compile_time_and_engine_runs(fixtures_dir, pva_double):
    """A .pvti trace: compile time is the union of compilation events, steps are the Engine::run spans."""
    profile = one(fixtures_dir / "traces" / "poptorch_4532.pvti")
    events = profile.events
    names = events["name"].astype(str)
    col = side(profile, "pvti", role="ipu", warmup_steps=2)
    compile_events = events[names.isin(["poptorch.trainingModel.compile", "Compiling graph"])]
    outer = compile_events["start_us"].min(), (compile_events["start_us"] + compile_events["dur_us"]).max()
    assert value(col, "compile_time_us") == pytest.approx(
        outer[1] - outer[0]
    )  # the graph compile nests inside
    runs = events[names == "Engine::run(main)"].sort_values("start_us")["dur_us"].to_numpy()
    assert col["step_source"] == "Engine::run"
    assert value(col, "step_count") == len(runs) - 2
    assert value(col, "warmup_mean_us") == pytest.approx(runs[:2].mean())
    runs = account.run_account(profile)
    idle = sum(account.idle_us(r) for _, r in runs.iterrows())
    assert value(col, "busy_pct") == pytest.approx(100 * (1 - idle / runs["window_us"].sum()))
    assert col["platform"] == "ipu"


def test_help_has_examples(capsys):
    code, out, _ = run(capsys, "pilot", "--help")
    assert code == 0 and "Usage: popprof pilot" in out and "Examples:" in out
    assert max(len(line) for line in out.splitlines()) <= 100


def test_cli_never_overwrites_an_input(capsys, tmp_path):
    ipu = tmp_path / "run.popprof.json"
    code, out, _ = run(capsys, "baseline", FIX / "mk2_training.popprof", "-o", ipu)
    assert code == 0
    before = ipu.read_bytes()
    code, _, err = run(capsys, "pilot", ipu, "--baseline", FIX / "mk2_oom.popprof", "-o", ipu)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "overwrite" in err
    assert ipu.read_bytes() == before


def test_a_baseline_file_of_an_ipu_profile_is_an_ipu_side(capsys, tmp_path, ipu):
    stored = tmp_path / "ipu-baseline.json"
    assert run(capsys, "baseline", FIX / "mk2_training.popprof", "-o", stored)[0] == 0
    code, out, _ = run(
        capsys, "pilot", stored, "--baseline", TRACES / "nccl_data.json.gz", "--format", "json"
    )
    assert code == 0
    col = json.loads(out)["columns"][0]
    assert col["platform"] == "ipu"
    assert value(col, "memory_headroom_bytes") == summarise(ipu)["memory"]["max_tile_headroom_bytes"]
    assert value(col, "step_p50_us") is None and col["figures"]["step_p50_us"]["missing"]


def test_launch_idle_and_stage_imbalance_are_the_summarys(ranks, pod4, ipu):
    """The GPU side's launch-bound idle is ``launches.launch_idle_us`` over the account's pooled window (the
    other device shares' base); the IPU side's stage imbalance is the summary pipeline's share of the run.
    Each is missing, with the reason, on the other platform and where the run has none."""
    g = side(ranks, "gpu", role="baseline")
    window = account.run_account(ranks)["window_us"].sum()
    idle = compute(ranks)["launches.launch_idle_us"]
    assert idle > 0 and value(g, "launch_idle_pct") == pytest.approx(100 * idle / window)
    assert value(g, "launch_idle_pct") <= 100 - value(g, "busy_pct")  # launch-bound idle is idle
    assert g["figures"]["stage_imbalance_pct"]["missing"] == "not a GPU figure (pipeline stages across IPUs)"
    p = side(pod4, "pod4", role="ipu")
    share = summarise(pod4)["pipeline"]["share"]
    assert value(p, "stage_imbalance_pct") == pytest.approx(100 * share)
    assert p["figures"]["launch_idle_pct"]["missing"].startswith("not an IPU figure")
    single = side(ipu, "ipu", role="ipu")  # one IPU: no pipeline stages
    assert value(single, "stage_imbalance_pct") is None
    assert "pipelined over two or more IPUs" in single["figures"]["stage_imbalance_pct"]["missing"]


def test_the_host_figure_is_one_wait_in_every_place():
    """The pilot's host figure is the device idle with the host not submitting (the account's ``idle_host``):
    its label and the breakdown bar say so, never the host blocked on device
    (the device table's ``host_wait_pct``, the host waiting for the device)."""
    from popprof.io import words
    from popprof.pilot.figures import FIGURES
    from popprof.pilot.plots import bars

    (figure,) = [f for f in FIGURES if f.key == "idle_host_pct"]
    assert words.HOST_NOT_SUBMITTING in figure.label
    for platform in ("gpu", "ipu"):
        labels = dict(bars(platform))
        assert words.HOST_NOT_SUBMITTING in labels["idle_host_pct"]
        assert words.HOST_BLOCKED not in labels.values()
    assert not [f.key for f in FIGURES if "host_wait" in f.key]
