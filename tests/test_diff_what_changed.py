"""``popprof diff``'s "What changed": the time account's window change split into its parts' changes, and the
events (programs) that changed most with the busy part that moved most (docs/diff.md, "What changed").

The expected figures are recomputed here from each side's own time account
(:func:`popprof.metrics.account.time_account`) and from the input files, never read back from the block.
Real inputs: HTA's trace-compare pair (``fixtures/real/traces/hta_trace_compare_{base,test}.json.gz``), the IPU
pair ``fixtures/mk2_training.popprof`` / ``mk2_training_v2.popprof`` (every ``DoExchange`` step 25 % longer,
fixtures/README.md) and a copy of ``kineto2021_resnet50_worker0.pt.trace.json.gz`` with one kernel's durations
doubled, written to ``tmp_path``.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

import popprof
from popprof.cli import main
from popprof.compare.document import to_dict
from popprof.compare.what_changed import noise_floor, what_changed
from popprof.metrics.account import GPU_PARTS, IPU_PARTS, PART_WORDS, time_account
from popprof.report.diff import render_markdown, render_text

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
REAL = FIXTURES / "real" / "traces"
HTA_BASE = REAL / "hta_trace_compare_base.json.gz"
HTA_NEW = REAL / "hta_trace_compare_test.json.gz"
RESNET = REAL / "kineto2021_resnet50_worker0.pt.trace.json.gz"
IPU_BASE = FIXTURES / "mk2_training.popprof"
IPU_NEW = FIXTURES / "mk2_training_v2.popprof"
#: The kernel whose durations the resnet variant doubles (its largest by device time).
DGRAD = "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>"
ADD_INT = "CUDAFunctor_add<int>"


def _pooled(profile, parts) -> dict[str, float]:
    """The run rows of the side's time account summed over devices: the window and each part."""
    runs = time_account(profile, steps=False)
    return {name: float(runs[name].sum()) for name in ("window_us", *parts)}


def _changes(base, new, parts) -> dict[str, float]:
    b, n = _pooled(base, parts), _pooled(new, parts)
    return {name: n[name] - b[name] for name in b}


def _kernel_total(path: Path, starts: str) -> float:
    """Summed ``dur`` (us) of the trace's kernels whose name starts with (or holds) ``starts``."""
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    return float(
        sum(
            e["dur"]
            for e in doc["traceEvents"]
            if str(e.get("cat", "")).lower() == "kernel" and starts in e.get("name", "")
        )
    )


def _flat(text: str) -> str:
    return " ".join(text.split())


# -- HTA's trace-compare pair -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hta():
    base, new = popprof.open(HTA_BASE), popprof.open(HTA_NEW)
    return base, new, popprof.diff(base, new)


def test_hta_pair_the_parts_changes_sum_to_the_windows(hta) -> None:
    base, new, result = hta
    expected = _changes(base, new, GPU_PARTS)
    doc = what_changed(result)
    assert doc["available"] and doc["material"] and doc["window_moved"] and doc["platform"] == "gpu"
    assert doc["window"]["change_us"] == pytest.approx(expected["window_us"], abs=1e-6) == -145.0
    assert sum(expected[p] for p in GPU_PARTS) == pytest.approx(expected["window_us"], abs=1e-6)
    shown = {p["part"]: p for p in doc["parts"]}
    assert list(shown) == ["idle_launch", "compute"]  # largest change first; the rest did not move
    assert shown["idle_launch"]["change_us"] == pytest.approx(expected["idle_launch"]) == -141.0
    assert shown["compute"]["change_us"] == pytest.approx(expected["compute"]) == -4.0
    assert shown["idle_launch"]["share_of_change"] == pytest.approx(141.0 / 145.0)
    assert shown["compute"]["share_of_change"] == pytest.approx(4.0 / 145.0)
    assert not any(p["offsetting"] for p in doc["parts"])
    assert sum(p["change_us"] for p in doc["parts"]) + doc["rest_us"] == pytest.approx(
        doc["window"]["change_us"]
    )
    assert shown["idle_launch"]["words"] == PART_WORDS["idle_launch"] == "idle, launch or dependency"


def test_hta_pair_names_the_kernel_that_shrank_with_compute(hta) -> None:
    _, _, result = hta
    who = what_changed(result)["contributors"]
    assert who["part"] == "compute" and who["section"] == "events" and not who["unavailable"]
    (row,) = who["rows"]  # the one device name that shrank (the other device names did not change)
    events = result.events.set_index("name")
    assert events.loc[row["name"], "category"] == "compute"
    assert events.loc["Memcpy HtoD (Pinned -> Device)", "category"] == "host_io"
    assert set(events.loc[events["where"] == "host", "category"]) == {""}  # host work has no device category
    assert ADD_INT in row["name"] and row["status"] == "shrunk"
    assert row["change"] == pytest.approx(_kernel_total(HTA_NEW, ADD_INT) - _kernel_total(HTA_BASE, ADD_INT))
    assert row["change"] == -4.0


def test_hta_pair_text_opens_with_the_block_within_80_columns(hta, capsys) -> None:
    assert main(["diff", str(HTA_BASE), str(HTA_NEW)]) == 0  # the gate passes as before
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    start = lines.index("What changed (the time account: device windows summed over devices)")
    block = lines[start : lines.index("", start)]
    assert len(block) <= 11
    assert block[1] == "  window 274.50 ms -> 274.35 ms: -145.0 us (-0.05 %), of which:"
    assert _flat(block[3]) == "idle, launch or dependency -141.0 us 97.2 %"
    assert _flat(block[4]) == "compute -4.0 us 2.8 %"
    assert block[5] == "  limit: undetermined, 99.3 % -> 99.3 %"  # idle with no launch recorded after it
    assert "compute -4.0 us: its device work (events by name) that changed most:" in block[6]
    assert "-4.0 us shrunk void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<int>" in _flat(
        " ".join(block[7:])
    )
    assert lines.index("  metric                            base        new     change       rel") > start


def test_hta_pair_json_and_markdown_hold_the_same_block(hta) -> None:
    _, _, result = hta
    doc = to_dict(result)["what_changed"]
    assert doc["window"]["change_us"] == -145.0 and [p["part"] for p in doc["parts"]] == [
        "idle_launch",
        "compute",
    ]
    markdown = render_markdown(result)
    assert "- idle, launch or dependency: -141.0 us (97.2 % of the change)" in markdown
    assert (
        "- compute -4.0 us, its device work that changed most: `void at::native::vectorized_elementwise_kernel<4, "
        in (markdown)
    )


# -- IPU pair -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ipu():
    base, new = popprof.open(IPU_BASE), popprof.open(IPU_NEW)
    return base, new, popprof.diff(base, new)


def test_ipu_pair_exchange_is_the_whole_change(ipu) -> None:
    base, new, result = ipu
    assert (base.steps["cycles"].sum() != new.steps["cycles"].sum()) and len(base.steps) == len(new.steps)
    expected = _changes(base, new, IPU_PARTS)
    assert sum(expected[p] for p in IPU_PARTS) == pytest.approx(expected["window_us"], rel=1e-9)
    doc = what_changed(result)
    assert doc["platform"] == "ipu" and doc["window_moved"]
    assert doc["window"]["change_us"] == pytest.approx(expected["window_us"])
    (part,) = doc["parts"]  # every other part is unchanged: DoExchange steps alone grew
    assert part["part"] == "exchange" and part["change_us"] == pytest.approx(expected["exchange"])
    assert part["share_of_change"] == pytest.approx(1.0)
    assert round(part["change_us"], 1) == 565.1


def test_ipu_pair_names_the_programs_that_grew_most(ipu) -> None:
    base, new, result = ipu
    who = what_changed(result)["contributors"]
    assert who["section"] == "programs" and who["unit"] == "cycles" and len(who["rows"]) == 3
    exchange = [side.steps[side.steps["category"] == "exchange"] for side in (base, new)]
    grown = (
        exchange[1].groupby("program", observed=True)["cycles"].sum()
        - exchange[0].groupby("program", observed=True)["cycles"].sum()
    ).astype("float64")
    top = grown.sort_values(ascending=False).head(3)
    assert [r["name"] for r in who["rows"]] == list(top.index)
    assert [r["change"] for r in who["rows"]] == list(top.to_numpy())
    assert all(r["name"].endswith("ExchangePre") for r in who["rows"])
    categories = result.programs.set_index("name")["category"]
    assert {categories[r["name"]] for r in who["rows"]} == {"exchange"}


def test_only_the_programs_of_the_part_are_named() -> None:
    """pod4_pipeline -> mk2_training: compute fell most; the programs named are compute programs (their steps'
    category), not the stream copies that fell more."""
    base, new = popprof.open(FIXTURES / "pod4_pipeline.popprof"), popprof.open(IPU_BASE)
    doc = what_changed(popprof.diff(base, new))
    assert doc["parts"][0]["part"] == "compute" and doc["parts"][0]["change_us"] < 0
    totals = [
        side.steps[side.steps["category"] == "compute"].groupby("program", observed=True)["cycles"].sum()
        for side in (base, new)
    ]
    change = totals[1].reindex(totals[0].index.union(totals[1].index)).fillna(0) - totals[0].reindex(
        totals[0].index.union(totals[1].index)
    ).fillna(0)
    expected = change.astype("float64").sort_values().head(3)
    rows = doc["contributors"]["rows"]
    assert [r["name"] for r in rows] == list(expected.index)
    assert [r["change"] for r in rows] == list(expected.to_numpy())
    every = pd.concat([base.steps, new.steps])
    assert set(every[every["program"].isin([r["name"] for r in rows])]["category"].astype(str)) == {"compute"}


def test_ipu_pair_exit_code_and_text(ipu, capsys) -> None:
    assert main(["diff", str(IPU_BASE), str(IPU_NEW)]) == 1  # the gate fails as before (cycles, memory)
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "  window 18.14 ms -> 18.71 ms: +565.1 us (+3.11 %), of which:" in out
    assert _flat("exchange +565.1 us 100.0 %") in _flat(out)
    assert "    +17,810  grown  encoder/layer_10/intermediate/Add_383/ExchangePre" in out


def test_runs_compared_per_run_are_explained_per_run(ipu) -> None:
    """Two runs against the first of them alone: the diff compares the execution figures per run, and the
    account's rows follow (each side's account divided by its runs, recomputed here from each side's own
    account), so the block explains the change of the mean run, not of the total."""
    from popprof.metrics.account import account_parts

    base, _, _ = ipu
    one_run = base.copy()
    one_run.set_table("steps", base.steps[base.steps["run"] == 0].reset_index(drop=True))
    one_run.set_table("runs", base.runs[base.runs["run"] == 0].reset_index(drop=True))
    result = popprof.diff(base, one_run)
    assert result.basis["execution"].per == "run"
    old, new = account_parts(base), account_parts(one_run)
    rows = result.metrics.set_index("name")
    for key in old:
        assert rows.loc[f"account.{key}", "base"] == pytest.approx(old[key] / 2)
        assert rows.loc[f"account.{key}", "new"] == pytest.approx(new[key])
    doc = what_changed(result)
    assert doc["available"] and doc["basis"] == "per run"
    window = new["window_us"] - old["window_us"] / 2
    assert doc["window"]["change_us"] == pytest.approx(window)
    assert sum(p["change_us"] for p in doc["parts"]) + doc["rest_us"] == pytest.approx(window)
    top = max(old, key=lambda k: abs(new[k] - old[k] / 2) if k != "window_us" else -1)
    assert doc["parts"][0]["part"] + "_us" == top
    text = render_text(result)
    assert "What changed (the time account: device windows summed over devices, per run)" in text
    assert "not explained here" not in text
    from popprof.report.diff_blocks import markdown_what_changed

    assert "**What changed** (the time account: device windows summed over devices, per run)" in "\n".join(
        markdown_what_changed(result)
    )


def test_the_same_profile_has_no_material_change(ipu) -> None:
    base, _, _ = ipu
    result = popprof.diff(base, base)
    doc = what_changed(result)
    assert doc["available"] and not doc["material"] and doc["parts"] == []
    text = _flat(render_text(result))
    assert (
        "What changed: no material change in the time account (window 18.14 ms -> 18.14 ms; no part" in text
    )


# -- a GPU trace with one kernel doubled ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def variants(tmp_path_factory) -> dict[str, Path]:
    """The resnet trace with the DGRAD kernel's durations doubled (``doubled``), and the same with the trace's
    last device work also started 10 ms later (``late``): the window grows by those 10 ms."""
    doc = json.loads(gzip.decompress(RESNET.read_bytes()))
    for e in doc["traceEvents"]:
        if str(e.get("cat", "")).lower() == "kernel" and e.get("name", "").startswith(DGRAD):
            e["dur"] = e["dur"] * 2
    folder = tmp_path_factory.mktemp("what_changed")
    (folder / "doubled.json").write_text(json.dumps(doc))
    device = [
        e for e in doc["traceEvents"] if str(e.get("cat", "")).lower() in ("kernel", "memcpy", "memset")
    ]
    max(device, key=lambda e: e["ts"] + e["dur"])["ts"] += 10_000
    (folder / "late.json").write_text(json.dumps(doc))
    return {"doubled": folder / "doubled.json", "late": folder / "late.json"}


@pytest.fixture(scope="module")
def resnet():
    return popprof.open(RESNET)


@pytest.fixture(scope="module")
def doubled(variants, resnet):
    new = popprof.open(variants["doubled"])
    return resnet, new, popprof.diff(resnet, new), variants["doubled"]


def test_a_doubled_kernel_moves_parts_inside_an_unchanged_window(doubled) -> None:
    base, new, result, _ = doubled
    expected = _changes(base, new, GPU_PARTS)
    assert sum(expected[p] for p in GPU_PARTS) == pytest.approx(expected["window_us"], abs=1e-6)
    assert abs(expected["window_us"]) < noise_floor(_pooled(base, ())["window_us"])  # the window did not move
    doc = what_changed(result)
    assert doc["material"] and not doc["window_moved"]
    assert all(p["share_of_change"] is None for p in doc["parts"])
    moved = {p["part"]: p["change_us"] for p in doc["parts"]}
    assert moved == pytest.approx({p: expected[p] for p in GPU_PARTS if abs(expected[p]) >= 1.0})
    assert doc["parts"][0]["part"] == "compute" and moved["compute"] > 0  # the kernel ran longer
    text = render_text(result)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "  window 996.48 ms -> 996.48 ms: +0.0 us, within noise; its parts moved:" in text


def test_a_doubled_kernel_is_the_largest_contributor(doubled) -> None:
    _, _, result, path = doubled
    who = what_changed(result)["contributors"]
    assert who["part"] == "compute"
    first = who["rows"][0]
    assert first["name"].startswith(DGRAD) and first["status"] == "grown"
    assert first["change"] == pytest.approx(_kernel_total(path, DGRAD) - _kernel_total(RESNET, DGRAD))
    assert first["change"] == pytest.approx(_kernel_total(RESNET, DGRAD))  # doubled: grew by its own time


def test_a_part_that_moved_against_the_window_offsets_it(variants, resnet) -> None:
    new = popprof.open(variants["late"])
    expected = _changes(resnet, new, GPU_PARTS)
    assert expected["window_us"] == pytest.approx(10_000.0, abs=1e-3)  # the last work 10 ms later
    assert sum(expected[p] for p in GPU_PARTS) == pytest.approx(expected["window_us"], abs=1e-6)
    result = popprof.diff(resnet, new)
    doc = what_changed(result)
    assert doc["window_moved"] and doc["window"]["change_us"] == pytest.approx(expected["window_us"])
    parts = {p["part"]: p for p in doc["parts"]}
    assert expected["copies"] < 0 and parts["copies"]["offsetting"]
    assert parts["copies"]["share_of_change"] == pytest.approx(expected["copies"] / expected["window_us"])
    assert not parts["compute"]["offsetting"] and parts["compute"]["share_of_change"] > 0
    shares = sum(p["share_of_change"] for p in doc["parts"]) + doc["rest_us"] / doc["window"]["change_us"]
    assert shares == pytest.approx(1.0)
    text = render_text(result)
    assert max(len(line) for line in text.splitlines()) <= 80
    row = next(line for line in text.splitlines() if line.startswith("  copies "))
    assert row.split()[-1] == "offsetting" and row.split()[-3].startswith("-")


# -- baselines ---------------------------------------------------------------------------------------------------


def test_a_baseline_holds_the_account_but_no_events(tmp_path, hta, capsys) -> None:
    baseline = tmp_path / "baseline.json"
    assert main(["baseline", str(HTA_BASE), "-o", str(baseline)]) == 0
    capsys.readouterr()
    _, _, profiles = hta
    doc = what_changed(popprof.diff(baseline, HTA_NEW))
    assert [(p["part"], p["change_us"]) for p in doc["parts"]] == [
        (p["part"], p["change_us"]) for p in what_changed(profiles)["parts"]
    ]
    assert doc["contributors"]["unavailable"] and doc["contributors"]["rows"] == []
    assert main(["diff", str(baseline), str(HTA_NEW)]) == 0
    out = capsys.readouterr().out
    assert "  compute -4.0 us: events not compared, so none named (see the note above)" in out

    # a baseline written before the account was a metric: one line says so, the rest is as before
    old = json.loads(baseline.read_text("utf-8"))
    old["metrics"] = {k: v for k, v in old["metrics"].items() if not k.startswith("account.")}
    (tmp_path / "old.json").write_text(json.dumps(old))
    result = popprof.diff(tmp_path / "old.json", HTA_NEW)
    assert what_changed(result) == {
        "available": False,
        "reason": "the time account is not in the base profile",
    }
    assert main(["diff", str(tmp_path / "old.json"), str(HTA_NEW)]) == 0
    out = capsys.readouterr().out
    assert (
        "\nWhat changed: not explained here: the time account is not in the base profile\n\n  metric" in out
    )


def test_an_ipu_account_against_a_gpu_one_is_not_explained(ipu, hta) -> None:
    """The two platforms' parts differ: none is on both sides, so the window's change has no parts to split it."""
    result = popprof.diff(ipu[0], hta[1])
    doc = what_changed(result)
    assert doc == {
        "available": False,
        "reason": "the time account's parts are not on both sides (account.communication_us, account.copies_us, "
        "account.exchange_us and 8 more)",
    }
    assert max(len(line) for line in render_text(result).splitlines()) <= 80


def test_the_noise_floor() -> None:
    """1 us, or 1 % of the base window when that is less (a window under 100 us)."""
    assert noise_floor(274_498.0) == 1.0
    assert noise_floor(50.0) == pytest.approx(0.5)
    assert noise_floor(0.0) == 1.0


def test_account_rows_follow_their_platforms_basis() -> None:
    """A GPU account's rows divide by the steps (the trace family), an IPU account's by the runs."""
    from popprof.compare.basis import Basis, account_family, normalise

    gpu = {"account.window_us": 100.0, "account.idle_host_us": 10.0, "trace.span_us": 50.0}
    ipu = {"account.window_us": 100.0, "account.exchange_us": 20.0, "execution.total_cycles": 400.0}
    assert account_family(gpu) == "trace" and account_family(ipu) == "execution"
    bases = {"trace": Basis("trace", "profiler step", 5, 2), "execution": Basis("execution", "run", 4, 1)}
    assert normalise(gpu, bases, "base") == {
        "account.window_us": 20.0,
        "account.idle_host_us": 2.0,
        "trace.span_us": 10.0,
    }
    assert normalise(ipu, bases, "base") == {
        "account.window_us": 25.0,
        "account.exchange_us": 5.0,
        "execution.total_cycles": 100.0,
    }
    totals = {"trace": Basis("trace", None, 2, 2)}
    assert normalise(gpu, totals, "base") == gpu


def test_junit_failures_of_time_figures_say_what_changed(ipu) -> None:
    """In CI, a failed time figure's JUnit failure carries the block (its details, not its one-line message);
    a memory figure's does not (it carries "What changed in memory": tests/test_diff_memory_changed.py)."""
    import xml.etree.ElementTree as ET

    from popprof.compare import gate
    from popprof.report.diff import render_junit
    from popprof.report.diff_blocks import render_what_changed

    base, new, _ = ipu
    result = popprof.diff(base, new)
    root = ET.fromstring(render_junit(result, gate(result)))
    failures = {case.get("name"): case.find("failure") for case in root.iter("testcase")}
    block = "\n".join(render_what_changed(result))
    cycles, memory = failures["execution.total_cycles"], failures["memory.always_live_bytes"]
    assert cycles.text == cycles.get("message") + "\n\n" + block
    assert "\n" not in cycles.get("message")
    assert block not in memory.text and "What changed (the time account" not in memory.text
