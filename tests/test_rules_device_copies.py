"""host.device-copies on the real inputs: the TPU inference profile that waits on host offloading for 84 % of its
time, and the GPU traces, whose host-device copies overlap compute or are too short to matter."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import popprof
from popprof.rules import RULES, check
from popprof.trace.spans import merge_intervals, subtract_intervals

ROOT = Path(__file__).resolve().parent.parent
TPU = ROOT / "fixtures" / "real" / "xplane" / "xprof_tpu_v6e_inference.xplane.pb"
RULE = "host.device-copies"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_inputs import real_inputs  # noqa: E402


@pytest.fixture(scope="module")
def tpu() -> popprof.Profile:
    return popprof.open(TPU)


def _copies_alone(profile: popprof.Profile, device: str) -> tuple[float, float]:
    """A device's host-device copy time with no compute or communication running, and its window (first to
    last activity), from the events table by interval arithmetic: the figure the rule rests on, recomputed."""
    events = profile.events
    mine = events[events["device"].astype(str) == device]
    category = mine["device_category"].astype(str).to_numpy()
    start = mine["start_us"].to_numpy(dtype=np.float64)
    end = start + mine["dur_us"].to_numpy(dtype=np.float64)
    copies = merge_intervals(start[category == "host_io"], end[category == "host_io"])
    busy = np.isin(category, ("compute", "exchange"))
    alone = subtract_intervals(*copies, *merge_intervals(start[busy], end[busy]))
    return float((alone[1] - alone[0]).sum()), float(end.max() - start.min())


_COPY_EVENT = re.compile(r"Memcpy (HtoD|DtoH) \((copy-start|copy-done)(\.\d+)?\)")


def _pair_keys(events: pd.DataFrame) -> set[tuple[str, str, str, int]]:
    """The asynchronous copies in the events, counted here by XLA's naming alone (not the HLO operands the
    reader reads): ``copy-start.N`` and ``copy-done.N`` on a device are the N-th instruction's two ops, and
    their k-th occurrences in time order are one copy, keyed (device, direction, N, k)."""
    names = events["name"].astype(str)
    copies = events[names.str.fullmatch(_COPY_EVENT.pattern)].sort_values("start_us", kind="stable")
    seen: dict[tuple[str, str, str, str], int] = {}
    keys = set()
    for device, name in zip(copies["device"].astype(str), copies["name"].astype(str), strict=True):
        direction, op, suffix = _COPY_EVENT.fullmatch(name).groups()
        k = seen.get((device, direction, suffix or "", op), 0)
        seen[(device, direction, suffix or "", op)] = k + 1
        keys.add((device, direction, suffix or "", k))
    return keys


def test_the_tpu_waiting_on_host_offloading_is_an_error_priced_by_its_copies(tpu) -> None:
    """XLA's copy-start/copy-done between host memory (S(5)) and HBM: tpu:1 spends 76.019 s of its 90.428 s
    window in them with nothing else running (84.1 %), an error; the gain is every TPU's such time."""
    (finding,) = check(tpu, rules=[RULE])
    assert finding.severity == "error" and finding.title == "Device time in host-device copies"
    alone, window = _copies_alone(tpu, "tpu:1")
    assert alone == pytest.approx(76.019e6, rel=1e-4) and window == pytest.approx(90.428e6, rel=1e-4)
    assert finding.value == pytest.approx(alone / window)
    assert finding.message.startswith("tpu:1: host-device copies with no compute or communication running")
    assert "84.1 % of its window 90.428 s (error at >= 30 %)" in finding.message
    pairs = _pair_keys(tpu.events)
    htod, dtoh = (sum(1 for k in pairs if k[:2] == ("tpu:1", d)) for d in ("HtoD", "DtoH"))
    assert (htod, dtoh) == (300, 300)  # 600 copy-start and 600 copy-done ops: 600 transfers
    ops = {d: 2 * n for d, n in (("HtoD", htod), ("DtoH", dtoh))}
    assert (
        f"by kind: HtoD {htod} copies ({ops['HtoD']} XLA ops), 57.783 s on the device; "
        f"DtoH {dtoh} copies ({ops['DtoH']} XLA ops), 18.236 s" in finding.message
    )
    every = sum(_copies_alone(tpu, f"tpu:{n}")[0] for n in range(4))
    assert finding.estimated_gain.value == pytest.approx(every, rel=1e-6)
    assert finding.where["devices"] == ["tpu:0", "tpu:1", "tpu:2", "tpu:3"]
    assert finding.advice == RULES[RULE].advice_for("tpu") and "copy-done" in finding.advice


def test_what_limits_the_tpu_run_names_it_first(tpu) -> None:
    """The time account says copies 84.1 %; the first priced opportunity is this finding, at its gain."""
    from popprof.report.explain import explained_summary

    doc = explained_summary(tpu)
    first = doc["what_limits"]["opportunities"][0]
    assert first["rule_id"] == RULE
    (finding,) = check(tpu, rules=[RULE])
    assert first["estimated_gain"]["value"] == pytest.approx(finding.estimated_gain.value)


@pytest.mark.parametrize(
    "path", [p for p in real_inputs() if p.suffix not in (".txt", ".pb") or p.name.endswith(".xplane.pb")]
)
def test_silent_on_every_other_real_input(path: Path) -> None:
    """No other real input spends 10 % of a device's window in host-device copies alone that are not pageable
    (the pipit export's copies are all pageable: host.pageable-copies judges them)."""
    if path == TPU:
        pytest.skip("the TPU profile: above")
    profile = popprof.open(path)
    assert [f for f in check(profile, rules=[RULE]) if f.rule_id == RULE] == []


def test_the_gpu_wording_and_an_ipu_profile(tmp_path) -> None:
    """A GPU trace's pinned copies (HTA's trace-compare pair: 1.2 ms on gpu:1, 0.4 % of its window) make a
    finding with the GPU's advice when the threshold is lowered; an IPU profile is not evaluated."""
    trace = popprof.open(ROOT / "fixtures" / "real" / "traces" / "hta_trace_compare_base.json.gz")
    (finding,) = check(trace, rules=[RULE], params={RULE: {"warning": 0.001}})
    assert finding.severity == "warning" and finding.message.startswith("rank 1 gpu:1: ")
    assert "HtoD pinned" in finding.message and finding.advice == RULES[RULE].advice_for("gpu")
    ipu = check(popprof.open(ROOT / "fixtures" / "mk2_training.popprof"), rules=[RULE])
    assert [f for f in ipu if f.rule_id == RULE] == []
    assert RULE in dict(ipu.not_evaluated)


def test_an_asynchronous_copy_counts_once_in_the_summary_and_the_rule(tpu) -> None:
    """The summary (JSON and text) and the rule read one count: per TPU and direction the transfers, as many
    as the copy-start/copy-done pairs counted from the events' names here; the ops are twice as many and the
    device time is every op's duration, the copy-done waits and the starts."""
    from click.testing import CliRunner

    from popprof.cli import cli

    def summary(*options: str) -> str:
        result = CliRunner().invoke(cli, ["summary", str(TPU), *options], env={"COLUMNS": None})
        assert result.exit_code == 0, result.output
        return result.stdout

    pairs = _pair_keys(tpu.events)
    records = json.loads(summary("--format", "json"))["trace"]["copies"]
    assert len(records) == 8
    events = tpu.events
    names = events["name"].astype(str)
    for r in records:
        mine = events[
            (events["device"].astype(str) == r["device"]) & names.str.startswith(f"Memcpy {r['direction']} (")
        ]
        assert r["count"] == sum(1 for k in pairs if k[:2] == (r["device"], r["direction"])) == 300
        assert r["ops"] == len(mine) == 600
        assert r["time_us"] == pytest.approx(float(mine["dur_us"].sum()), rel=1e-9)
    (finding,) = check(tpu, rules=[RULE])
    evidence = finding.evidence.set_index(["device", "direction"])
    for r in records:
        assert evidence.loc[(r["device"], r["direction"]), "count"] == r["count"]
        assert evidence.loc[(r["device"], r["direction"]), "ops"] == r["ops"]
    on_tpu1 = {r["direction"]: r["count"] for r in records if r["device"] == "tpu:1"}
    assert (
        f"HtoD {on_tpu1['HtoD']} copies (" in finding.message
        and f"DtoH {on_tpu1['DtoH']} copies (" in finding.message
    )
    text = summary()
    block = text[text.index("Host-device copies (") :].split("\n\n")[0].splitlines()
    shown = [line.split()[line.split().index("unknown") + 1] for line in block if " unknown " in line]
    assert shown == [str(r["count"]) for r in records]
    assert "    (count: transfers, an XLA copy-start and its copy-done once)" in block
    assert max(len(line) for line in text.splitlines()) <= 80


def test_a_copy_cut_at_the_profile_edge_counts_once(tpu) -> None:
    """Cut tpu:0 where its first copy-done.4 begins (its copy-start before the cut) and where its last
    copy-done.2 begins (its copy-start kept, its wait gone): each cut copy still counts once, so the transfers
    are the copies (pairs, from the whole profile) with an op left, and the ops what is left."""
    from popprof.metrics.copies import copy_records

    events = tpu.events
    names = events["name"].astype(str)
    on0 = events["device"].astype(str) == "tpu:0"
    begin = float(events.loc[on0 & (names == "Memcpy HtoD (copy-done.4)"), "start_us"].min())
    end = float(events.loc[on0 & (names == "Memcpy HtoD (copy-done.2)"), "start_us"].max())
    drop = on0 & ((events["start_us"] < begin) | (events["start_us"] >= end))
    cut = tpu.copy("cut")
    cut.set_table("events", events[~drop.to_numpy()].reset_index(drop=True))
    left = cut.events
    kept = {k for k in _pair_keys(tpu.events) if k[0] == "tpu:0"}
    # a pair key of the whole profile survives when one of its two ops does: recount on the ops kept
    whole = _pair_ops(tpu.events)
    rows = set(zip(left["start_us"].tolist(), left["name"].astype(str).tolist(), strict=True))
    alive = {k for k in kept if any(op in rows for op in whole[k])}
    halves = {k for k in alive if not all(op in rows for op in whole[k])}
    # the first copy-done.4 (its start cut), the last copy-start.2 (its wait cut), and copies then in flight
    assert {("tpu:0", "HtoD", ".4", 0), ("tpu:0", "HtoD", ".2", 99)} <= halves
    records = [r for r in copy_records(cut) if r["device"] == "tpu:0"]
    for r in records:
        mine = {k for k in alive if k[1] == r["direction"]}
        assert r["count"] == len(mine) < 300
        on = (left["device"].astype(str) == "tpu:0") & left["name"].astype(str).str.startswith(
            f"Memcpy {r['direction']} ("
        )
        assert r["ops"] == int(on.sum()) == 2 * len(mine) - len(halves & mine)


def _pair_ops(events: pd.DataFrame) -> dict[tuple[str, str, str, int], list[tuple[float, str]]]:
    """Each copy of :func:`_pair_keys` with its ops as (start, name)."""
    names = events["name"].astype(str)
    copies = events[names.str.fullmatch(_COPY_EVENT.pattern)].sort_values("start_us", kind="stable")
    seen: dict[tuple[str, str, str, str], int] = {}
    out: dict[tuple[str, str, str, int], list[tuple[float, str]]] = {}
    for device, name, start in zip(
        copies["device"].astype(str), copies["name"].astype(str), copies["start_us"].tolist(), strict=True
    ):
        direction, op, suffix = _COPY_EVENT.fullmatch(name).groups()
        k = seen.get((device, direction, suffix or "", op), 0)
        seen[(device, direction, suffix or "", op)] = k + 1
        out.setdefault((device, direction, suffix or "", k), []).append((start, name))
    return out


def test_the_html_report_shows_the_same_transfers(tpu, tmp_path) -> None:
    """The HTML report's copies table reads the summary's records: per TPU and direction the copies column is
    the transfers counted from the events here, not the ops."""
    from click.testing import CliRunner

    from popprof.cli import cli

    out = tmp_path / "tpu.html"
    result = CliRunner().invoke(
        cli, ["report", str(TPU), "--no-plots", "-o", str(out)], env={"COLUMNS": None}
    )
    assert result.exit_code == 0, result.output
    html = out.read_text("utf-8")
    table = html[html.index('<table class="copies">') :].split("</table>")[0]
    rows = re.findall(r"<td>(tpu:\d)</td><td>(HtoD|DtoH) unknown</td><td class=\"num\">([\d,]+)</td>", table)
    pairs = _pair_keys(tpu.events)
    assert len(rows) == 8
    for device, direction, shown in rows:
        assert int(shown.replace(",", "")) == sum(1 for k in pairs if k[:2] == (device, direction))
