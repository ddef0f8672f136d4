"""The CUPTI range-profiler counters in the metric registry (``counters.*``): each figure equals a sum computed
here from the raw trace JSON, ``baseline`` and ``diff`` read them, a counter scaled in a copy of the trace shows
in the diff with its relative change and fails or passes a budget, and a trace without counters has none."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import popprof
import popprof.metrics as registry
from popprof.cli import main
from popprof.metrics import counters

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
TRACE = REAL / "cupti_range_profiler.json.gz"
FFMA = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
#: HTA's weights (CUDA_SASS_INSTRUCTION_COUNTER_FLOPS), written out here: a fused multiply-add is 2 FLOPs
WEIGHT = {"fma": 2, "mul": 1, "add": 1}
PRECISION = {"h": "fp16", "f": "fp32", "d": "fp64"}


def raw_kernels(path: Path = TRACE) -> list[dict]:
    """The trace's range-profiler kernels as HTA picks them: ``cuda_profiler_range`` complete events."""
    data = json.loads(gzip.decompress(path.read_bytes()))
    return [e for e in data["traceEvents"] if e.get("cat") == counters.RANGE_CHANNEL and e.get("ph") == "X"]


@pytest.fixture(scope="module")
def values() -> dict[str, float | None]:
    return registry.compute(popprof.open(TRACE, with_args=True))


def test_the_kernel_count_is_the_traces(values) -> None:
    assert values["counters.kernels"] == len(raw_kernels()) == 77


def test_each_counter_total_is_the_sum_over_the_raw_kernels(values) -> None:
    kernels = raw_kernels()
    names = {name for e in kernels for name in e["args"]}
    assert len(names) == 9 and all(name.endswith(".sum") for name in names)
    for name in names:
        by_hand = sum(e["args"][name] for e in kernels if name in e["args"])
        assert values[f"counters.total.{name}"] == by_hand, name
    assert values[f"counters.total.{FFMA}"] == 39_142_369_720


def test_the_sass_flops_weigh_the_raw_counters_as_hta_does(values) -> None:
    by_precision = {"fp16": 0, "fp32": 0, "fp64": 0}
    for event in raw_kernels():
        for name, value in event["args"].items():
            kind = name.removeprefix("smsp__sass_thread_inst_executed_op_").removesuffix("_pred_on.sum")
            by_precision[PRECISION[kind[0]]] += WEIGHT[kind[1:]] * value
    for precision, flops in by_precision.items():
        assert values[f"counters.sass_flops.{precision}"] == flops, precision
    assert values["counters.sass_flops"] == sum(by_precision.values()) == 80_231_038_456
    assert by_precision["fp64"] == 0  # recorded as zero: a member, not left out


def test_only_additive_counters_are_summed() -> None:
    assert counters.additive("dram__bytes_read.sum") and counters.additive(FFMA)
    for name in (
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__bytes_read.sum.per_second",
        "sm__warps_active.avg",
        "smsp__cycles_active.max",
        "sm__inst_executed_pipe_tensor.sum.pct_of_peak_sustained_active",
    ):
        assert not counters.additive(name), name


def test_rates_and_averages_are_not_figures(tmp_path: Path) -> None:
    """A counter that is not a sum (a rate, an average) stays in the summary's table but gets no total."""
    data = json.loads(gzip.decompress(TRACE.read_bytes()))
    for event in data["traceEvents"]:
        if event.get("cat") == counters.RANGE_CHANNEL:
            event["args"]["dram__bytes_read.sum"] = 1000
            event["args"]["dram__bytes_read.sum.per_second"] = 5.0e9
            event["args"]["sm__warps_active.avg"] = 12.5
    path = tmp_path / "more_counters.json"
    path.write_text(json.dumps(data))
    found = registry.compute(popprof.open(path, with_args=True))
    assert found["counters.total.dram__bytes_read.sum"] == 77_000
    assert not any(k.endswith((".per_second", ".avg")) for k in found)


def test_every_figure_is_neutral() -> None:
    """More FLOPs or bytes for the same work is no regression by itself: a budget gates a change either way."""
    for name in ("counters.kernels", "counters.sass_flops", "counters.sass_flops.", "counters.total."):
        assert registry.METRICS[name].better is None, name
    assert not registry.METRICS["counters.total."].absent_is_zero


def test_the_figures_are_the_same_whatever_the_read_was_asked() -> None:
    """The reader reads a range-profiler trace's args whatever it is asked (its counters are there), so the
    figures are the same from ``popprof.open(path)``, the commands and the store."""
    bare = registry.compute(popprof.open(TRACE))
    full = registry.compute(popprof.open(TRACE, with_args=True))
    mine = {k: v for k, v in full.items() if k.startswith("counters.")}
    assert mine and all(v is not None for v in mine.values())
    assert {k: bare[k] for k in mine} == mine


@pytest.mark.parametrize("name", ["hta_simple_add.json.gz", "nccl_data.json.gz", "cpu_only_rank-34.json.gz"])
def test_a_trace_without_counters_has_none_of_them(name: str, capsys) -> None:
    found = registry.compute(popprof.open(REAL / name, with_args=True))
    assert found["counters.kernels"] is None and found["counters.sass_flops"] is None
    assert not any(k.startswith(("counters.sass_flops.", "counters.total.")) for k in found)
    assert main(["baseline", str(REAL / name)]) == 0
    assert "counters." not in capsys.readouterr().out


def test_baseline_holds_them(capsys) -> None:
    assert main(["baseline", str(TRACE)]) == 0
    metrics = json.loads(capsys.readouterr().out)["metrics"]
    assert metrics["counters.kernels"]["value"] == 77
    assert metrics["counters.sass_flops"]["value"] == 80_231_038_456
    assert metrics["counters.sass_flops"]["unit"] == "flop"
    assert metrics[f"counters.total.{FFMA}"]["value"] == 39_142_369_720


@pytest.fixture(scope="module")
def scaled(tmp_path_factory) -> Path:
    """A copy of the fixture whose FFMA counter is 1.5 times the real one on every kernel."""
    data = json.loads(gzip.decompress(TRACE.read_bytes()))
    for event in data["traceEvents"]:
        if event.get("cat") == counters.RANGE_CHANNEL:
            event["args"][FFMA] = event["args"][FFMA] * 3 // 2
    path = tmp_path_factory.mktemp("scaled") / "scaled_ffma.json"
    path.write_text(json.dumps(data))
    return path


def _diff_json(capsys, *args: str) -> tuple[int, dict]:
    code = main(["diff", *args, "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_diff_reports_the_scaled_counter(scaled: Path, capsys) -> None:
    kernels = raw_kernels()
    ffma = sum(e["args"][FFMA] for e in kernels)
    ffma_new = sum(e["args"][FFMA] * 3 // 2 for e in kernels)
    code, doc = _diff_json(capsys, str(TRACE), str(scaled), "--no-gate")
    assert code == 0
    rows = {m["name"]: m for m in doc["metrics"]}
    total = rows[f"counters.total.{FFMA}"]
    assert (total["base"], total["new"], total["status"]) == (ffma, ffma_new, "changed")
    assert total["rel_change"] == pytest.approx(0.5, rel=1e-6)
    flops = rows["counters.sass_flops"]
    assert flops["abs_change"] == 2 * (ffma_new - ffma)  # an FMA is two FLOPs
    assert flops["rel_change"] == pytest.approx(2 * (ffma_new - ffma) / 80_231_038_456)
    assert rows["counters.sass_flops.fp32"]["status"] == "changed"
    assert main(["diff", str(TRACE), str(scaled), "--no-gate"]) == 0
    text = capsys.readouterr().out
    assert f"counters.total.{FFMA}" in text and "+50.00 %" in text


def test_a_budget_on_the_flops_fails_and_passes(scaled: Path, tmp_path: Path, capsys) -> None:
    tight = tmp_path / "tight.toml"
    tight.write_text('[budgets]\n"counters.sass_flops" = "+10%"\n')
    code, doc = _diff_json(capsys, str(TRACE), str(scaled), "--budget", str(tight))
    assert code == 1 and not doc["gate"]["passed"]
    (violation,) = doc["gate"]["violations"]
    assert violation["metric"] == "counters.sass_flops" and violation["rel_change"] > 0.1
    loose = tmp_path / "loose.toml"
    loose.write_text('[budgets]\n"counters.sass_flops" = "+60%"\n"counters.total.*" = { relative = 0.6 }\n')
    code, doc = _diff_json(capsys, str(TRACE), str(scaled), "--budget", str(loose))
    assert code == 0 and doc["gate"]["passed"]
    checked = {c["metric"] for c in doc["gate"]["checks"]}
    assert {"counters.sass_flops", f"counters.total.{FFMA}"} <= checked


def test_a_baseline_of_the_fixture_gates_the_scaled_copy(scaled: Path, tmp_path: Path, capsys) -> None:
    baseline = tmp_path / "baseline.json"
    assert main(["baseline", str(TRACE), "-o", str(baseline)]) == 0
    budget = tmp_path / "b.toml"
    budget.write_text(f'[budgets]\n"counters.total.{FFMA}" = "+49%"\n')
    code, doc = _diff_json(capsys, str(baseline), str(scaled), "--budget", str(budget))
    assert code == 1
    assert [v["metric"] for v in doc["gate"]["violations"]] == [f"counters.total.{FFMA}"]


def test_the_store_and_trend_track_them(scaled: Path, tmp_path: Path, capsys) -> None:
    """``store add`` reads a range-profiler trace's args as ``baseline`` does; ``trend`` sees the change."""
    store = tmp_path / "store"
    assert main(["store", "init", str(store)]) == 0
    for run, source in (("1", TRACE), ("2", scaled)):
        add = ["store", "add", str(store), str(source), "--run-id", run, "--profile", "cupti"]
        assert main([*add, "--time", f"2026-12-0{run}T00:00:00Z"]) == 0
    capsys.readouterr()
    assert main(["trend", "show", str(store), "counters.sass_flops", "--format", "json"]) == 0
    (series,) = json.loads(capsys.readouterr().out)["series"]
    kernels = raw_kernels()
    added = 2 * sum(e["args"][FFMA] * 3 // 2 - e["args"][FFMA] for e in kernels)  # an FMA is two FLOPs
    assert series["values"] == [80_231_038_456, 80_231_038_456 + added]
    (change,) = series["changes"]
    assert change["rel_change"] == pytest.approx(added / 80_231_038_456)


def test_the_totals_go_per_profiler_step_when_the_step_counts_differ() -> None:
    """Sums over kernels grow with the steps profiled: per step, as the trace's other totals, when the two sides
    ran different numbers of steps (docs/diff.md, "Basis")."""
    from popprof.compare.basis import choose, normalise

    base = {"trace.profiler_step_count": 2.0, "counters.kernels": 10.0, "counters.sass_flops": 8.0}
    base |= {"counters.sass_flops.fp32": 8.0, f"counters.total.{FFMA}": 4.0}
    new = {k: (4.0 if k == "trace.profiler_step_count" else 2 * v) for k, v in base.items()}
    bases = choose(base, new)
    assert bases["trace"].per == "profiler step"
    assert normalise(base, bases, "base") == {
        **normalise(new, bases, "new"),
        "trace.profiler_step_count": 2.0,
    }


def test_the_counters_names_are_public_words_of_redaction() -> None:
    """Every SASS counter the FLOPs weigh is a public name of the redaction vocabulary (both the redactor's and
    the leak scan's), so a redacted range-profiler trace keeps its ``counters.*`` figures
    (``tests/test_redact_real.py`` compares them)."""
    from popprof.metrics.counters import SASS_FLOP_COUNTERS
    from popprof.redaction.scan_vocabulary import vocabulary_names
    from popprof.redaction.vocabulary.builtin import CUPTI_SASS_COUNTERS

    assert set(SASS_FLOP_COUNTERS) == CUPTI_SASS_COUNTERS
    assert vocabulary_names() >= CUPTI_SASS_COUNTERS
