"""Host-device copies by kind (popprof/metrics/copies.py) on the real traces, against the time account and
HolisticTraceAnalysis 0.5.0's memory-bandwidth summary.

``fixtures/real/traces/hta_memory_bw_reference.json`` (written by ``make_hta_memory_bw.py`` there, HTA 0.5.0 in
its own virtualenv) holds, per run, rank and HTA memory kind, the ``describe()`` of HTA's bandwidth series.
Where no two copies of a kind overlap or touch on the rank, that series' positive points are the copies' own
bandwidths, so its ``count``, ``mean``, ``min`` and ``max`` are popprof's :func:`hta_bandwidth`; HTA's ``std`` and
quartiles popprof does not give. popprof's per-kind table (:func:`copy_kinds`) is not HTA's figure: it counts
every step (HTA leaves the last profiler step out), splits a direction by host memory and gives bytes / time.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import popprof
from popprof.metrics import copies
from popprof.metrics.account import run_account

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
REFERENCE = json.loads((REAL / "hta_memory_bw_reference.json").read_text("utf-8"))
PATHS = {
    "kineto2021_resnet50_worker0": REAL / "kineto2021_resnet50_worker0.pt.trace.json.gz",
    "hta_alexnet_first_steps": REAL / "hta_alexnet_first_steps.json.gz",
    "hta_simple_add": REAL / "hta_simple_add.json.gz",
    "two_ranks": REAL / "two_ranks",
    "dlrm_8ranks": REAL / "dlrm_8ranks",
    "tracelens_b200_vllm_eager": REAL / "tracelens_b200_vllm_eager.json.gz",
    "nccl_data": REAL / "nccl_data.json.gz",
    "amd_mi250_minitoy": REAL / "amd_mi250_minitoy.json.gz",
}


@pytest.fixture(scope="module")
def profiles() -> dict[str, popprof.Profile]:
    return {run: popprof.open(path, with_args=True) for run, path in PATHS.items()}


def test_reference_is_hta_050_on_every_run() -> None:
    assert (REFERENCE["tool"], REFERENCE["version"]) == ("HolisticTraceAnalysis", "0.5.0")
    assert set(REFERENCE["runs"]) == set(PATHS)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Memcpy HtoD (Pageable -> Device)", ("HtoD pageable", "HtoD", "pageable")),
        ("Memcpy HtoD (Pinned -> Device)", ("HtoD pinned", "HtoD", "pinned")),
        ("Memcpy DtoH (Device -> Pageable)", ("DtoH pageable", "DtoH", "pageable")),
        ("Memcpy DtoH (Device -> Pinned)", ("DtoH pinned", "DtoH", "pinned")),
        ("Memcpy DtoD (Device -> Device)", ("DtoD", "DtoD", "device")),
        ("Memset (Device)", ("memset", "memset", "device")),
        ("Memcpy HtoD (Host -> Device)", ("HtoD unknown", "HtoD", "unknown")),  # AMD: which host memory?
        ("Memcpy HtoH (Pinned -> Pageable)", ("HtoH pageable", "HtoH", "pageable")),
        ("Memcpy HtoD (Managed -> Device)", ("HtoD unknown", "HtoD", "unknown")),
        ("dma_read", ("other", "other", "unknown")),
    ],
)
def test_kind_of_a_name(name: str, expected: tuple[str, str, str]) -> None:
    assert copies.copy_kind(name) == expected
    assert copies.copy_kind_of(expected[0]) == expected


@pytest.mark.parametrize("run", sorted(PATHS))
def test_kinds_sum_to_the_accounts_copies(profiles, run: str) -> None:
    """One definition of copy time: per device, the kinds' ``copies_us`` sum to the time account's
    ``copies`` part (what the summary's account and the priced rules read)."""
    profile = profiles[run]
    kinds = copies.copy_kinds(profile)
    assert not kinds.empty
    runs = run_account(profile)
    per_device = copies.device_copies(profile)
    for row in runs.itertuples(index=False):
        key = (-1 if pd.isna(row.rank) else int(row.rank), str(row.device))
        assert per_device.get(key, 0.0) == pytest.approx(row.copies, rel=1e-9, abs=1e-6), key
    # no kind's part of the account is more than its own device time
    assert (kinds["copies_us"] <= kinds["time_us"] + 1e-6).all()


def test_pageable_resnet50_copies_as_the_trace_says(profiles) -> None:
    """kineto2021's ResNet-50: 12 pageable host-to-device copies, per step one of 19,267,584 bytes (the input
    batch) and one of 256 (the labels), read from the trace's args: their bytes over their time is the
    achieved bandwidth."""
    kinds = copies.copy_kinds(profiles["kineto2021_resnet50_worker0"]).set_index("kind")
    pageable = kinds.loc["HtoD pageable"]
    rows = copies.copy_rows(profiles["kineto2021_resnet50_worker0"])
    mine = rows[rows["kind"] == "HtoD pageable"]
    assert pageable["count"] == len(mine) == 12
    assert pageable["bytes"] == mine["bytes"].sum() == 6 * 19267584 + 6 * 256
    time = float((mine["end_us"] - mine["start_us"]).sum())
    assert pageable["time_us"] == pytest.approx(time)
    assert pageable["gbps"] == pytest.approx(pageable["bytes"] / (time * 1e3))
    assert pageable["copy_gbps_max"] == pytest.approx(mine["bandwidth_gbps"].max())


def test_pinned_and_pageable_apart_on_dlrm(profiles) -> None:
    kinds = copies.copy_kinds(profiles["dlrm_8ranks"])
    assert set(kinds["rank"].astype(int)) == set(range(8))
    for _, mine in kinds.groupby("rank"):
        found = set(mine["kind"])
        assert {"HtoD pageable", "HtoD pinned", "DtoH pageable", "DtoD"} <= found


def test_nested_copies_count_but_not_twice_in_the_account(profiles) -> None:
    """hta_simple_add: 8 of its 16 pageable copies lie inside another copy on the same track (Kineto's 1 us
    copies under a long one): counted as copies (HTA counts them too), their time the outer copy's in the
    account."""
    rows = copies.copy_rows(profiles["hta_simple_add"])
    mine = rows[rows["kind"] == "HtoD pageable"]
    assert len(mine) == 16
    assert int(mine["nested"].sum()) == 8
    kinds = copies.copy_kinds(profiles["hta_simple_add"]).set_index("kind")
    outer = mine[~mine["nested"].to_numpy(dtype=bool)]
    assert (
        kinds.loc["HtoD pageable", "copies_us"] <= float((outer["end_us"] - outer["start_us"]).sum()) + 1e-6
    )


def test_without_args_no_bytes_but_the_same_times() -> None:
    bare = copies.copy_kinds(popprof.open(PATHS["kineto2021_resnet50_worker0"]))
    full = copies.copy_kinds(popprof.open(PATHS["kineto2021_resnet50_worker0"], with_args=True))
    assert bare["bytes"].isna().all() and bare["gbps"].isna().all()
    assert full["bytes"].notna().all()
    assert np.array_equal(bare["time_us"].to_numpy(), full["time_us"].to_numpy())
    assert np.array_equal(bare["copies_us"].to_numpy(), full["copies_us"].to_numpy())


def _hta_cases() -> list[tuple[str, str, str]]:
    return [
        (run, rank, kind)
        for run, ranks in REFERENCE["runs"].items()
        for rank, kinds in (ranks or {}).items()
        for kind in kinds
    ]


@pytest.mark.parametrize(("run", "rank", "kind"), _hta_cases())
def test_bandwidth_summary_matches_hta(profiles, run: str, rank: str, kind: str) -> None:
    hta = REFERENCE["runs"][run][rank][kind]
    ours = copies.hta_bandwidth(profiles[run])
    ranks = ours["rank"].map(lambda r: 0 if r is None or (isinstance(r, float) and math.isnan(r)) else int(r))
    row = ours[(ranks == int(rank)) & (ours["name"] == kind)]
    assert len(row) == 1
    row = row.iloc[0]
    # the same figure only where no two copies of the kind overlap or touch on the rank (HTA's points are
    # then each copy's own bandwidth); on these real traces none does
    assert not row["concurrent"]
    assert row["count"] == hta["count"]
    for stat in ("mean", "min", "max"):
        assert row[stat] == pytest.approx(hta[stat], rel=1e-12), stat


def test_every_hta_kind_is_popprofs_and_back(profiles) -> None:
    for run, ranks in REFERENCE["runs"].items():
        ours = copies.hta_bandwidth(profiles[run])
        theirs = {(int(rank), kind) for rank, kinds in (ranks or {}).items() for kind in kinds}
        mine = {
            (0 if r is None or r != r else int(r), n) for r, n in zip(ours["rank"], ours["name"], strict=True)
        }
        assert mine == theirs, run


def test_amd_copies_carry_no_bytes_nor_bandwidth(profiles) -> None:
    """AMD's roctracer copies name no host memory and carry no bytes: kind ``HtoD unknown``, figures missing;
    HTA finds no positive bandwidth either (``{}``)."""
    kinds = copies.copy_kinds(profiles["amd_mi250_minitoy"])
    assert list(kinds["kind"]) == ["HtoD unknown"]
    assert kinds["bytes"].isna().all()
    assert REFERENCE["runs"]["amd_mi250_minitoy"] == {}


def test_a_trace_without_copies_gives_empty_tables() -> None:
    profile = popprof.open(REAL / "tracelens_mi210_gpu_only.json.gz")
    assert copies.copy_kinds(profile).empty
    assert copies.copy_rows(profile).empty
    assert copies.device_copies(profile) == {}
    assert copies.hta_bandwidth(profile).empty


def _summary(path: Path, *options: str) -> str:
    from click.testing import CliRunner

    from popprof.cli import cli

    result = CliRunner().invoke(cli, ["summary", str(path), *options], env={"COLUMNS": None})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_summary_shows_copies_by_kind_in_text_and_json() -> None:
    path = PATHS["kineto2021_resnet50_worker0"]
    doc = json.loads(_summary(path, "--format", "json"))
    kinds = doc["trace"]["copies"]
    expected = copies.copy_kinds(popprof.open(path, with_args=True))
    assert [k["kind"] for k in kinds] == list(expected["kind"])
    assert [k["count"] for k in kinds] == list(expected["count"])
    assert [k["copies_us"] for k in kinds] == pytest.approx(list(expected["copies_us"]))
    text = _summary(path)
    block = text[text.index("Host-device copies") :].split("\n\n")[0].splitlines()
    assert len(block) == 1 + len(kinds)
    assert "HtoD pageable" in block[1] and "110.3 MiB" in block[1] and "10.1 GB/s" in block[1]


def test_many_devices_are_pooled_per_kind_in_the_text(profiles) -> None:
    """dlrm_8ranks: eight devices, more than the text lists one by one: one row per kind over all of them (the
    sums of the devices' records, GB/s the pooled bytes over the pooled time); the JSON keeps every device."""
    records = copies.copy_records(profiles["dlrm_8ranks"])
    pooled = copies.pooled_copy_records(records)
    assert [p["kind"] for p in pooled] == ["HtoD pageable", "DtoH pageable", "HtoD pinned", "DtoD", "memset"]
    for p in pooled:
        mine = [r for r in records if r["kind"] == p["kind"]]
        assert p["devices"] == len(mine) and p["count"] == sum(r["count"] for r in mine)
        assert p["bytes"] == pytest.approx(sum(r["bytes"] for r in mine))
        assert p["gbps"] == pytest.approx(p["bytes"] / (sum(r["time_us"] for r in mine) * 1e3))
    text = _summary(PATHS["dlrm_8ranks"])
    block = text[text.index("Host-device copies") :].split("\n\n")[0].splitlines()
    assert len(block) == 1 + len(pooled) and block[1].startswith("    8 devices      HtoD pageable      64")
    assert len(json.loads(_summary(PATHS["dlrm_8ranks"], "--format", "json"))["trace"]["copies"]) == len(
        records
    )


def test_summary_has_no_copies_block_without_copies() -> None:
    path = REAL / "tracelens_mi210_gpu_only.json.gz"
    assert "Host-device copies" not in _summary(path)
    assert "copies" not in json.loads(_summary(path, "--format", "json"))["trace"]


def _kernel(name: str, cat: str, ts: float, dur: float, stream: int, corr: int, **args) -> dict:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 0,
        "tid": stream,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": stream, "correlation": corr, **args},
    }


def test_copy_time_under_compute_and_shared_between_kinds(tmp_path: Path) -> None:
    """A made-up trace: a pageable copy half under a kernel, a pinned copy on another stream overlapping it.
    The account's copies are the copy time with no kernel running; the time both copies run goes to the
    pageable one (first in KIND_ORDER); each kind's own device time is its whole duration."""
    events = [
        _kernel("gemm", "kernel", 0.0, 10.0, 7, 1),
        _kernel("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", 5.0, 10.0, 8, 2, bytes=1000),  # 5..15
        _kernel("Memcpy HtoD (Pinned -> Device)", "gpu_memcpy", 12.0, 8.0, 9, 3, bytes=4000),  # 12..20
        _kernel("relu", "kernel", 18.0, 4.0, 7, 4),  # 18..22
    ]
    path = tmp_path / "made_up.json"
    path.write_text(json.dumps({"traceEvents": events}))
    profile = popprof.open(path, with_args=True)
    kinds = copies.copy_kinds(profile).set_index("kind")
    # pageable: 10..15 with no kernel (5 us); pinned: 15..18 (12..15 is the pageable copy's), 3 us
    assert kinds.loc["HtoD pageable", "copies_us"] == pytest.approx(5.0)
    assert kinds.loc["HtoD pinned", "copies_us"] == pytest.approx(3.0)
    assert kinds.loc["HtoD pageable", "time_us"] == pytest.approx(10.0)
    assert kinds.loc["HtoD pinned", "gbps"] == pytest.approx(4000 / (8.0 * 1e3))
    (copies_part,) = run_account(profile)["copies"]
    assert copies_part == pytest.approx(8.0)
    spans = copies.exclusive_spans(profile)
    start, end = spans[(-1, "gpu:0", "HtoD pinned")]
    assert list(zip(start.tolist(), end.tolist(), strict=True)) == [(15.0, 18.0)]


XPLANE_GPU = (
    Path(__file__).resolve().parent.parent / "fixtures" / "real" / "xplane" / "jax06_conv_mi300x.xplane.pb"
)


@pytest.mark.parametrize("run", sorted(PATHS))
def test_a_gpu_copy_event_is_one_copy(profiles, run: str) -> None:
    """On a GPU one copy event is one transfer: every kind's ``count`` is its ``ops`` and its events in
    :func:`copy_rows`, counted here per (rank, device, kind); no copy is left out of the count."""
    _one_copy_per_event(profiles[run])


def test_an_xplane_gpu_copy_event_is_one_copy() -> None:
    """The XPlane reader's GPU copies (JAX 0.6 on an MI300X: 53 ``CopyDeviceToDevice`` events, read as Kineto's
    ``Memcpy DtoD``) count one each: only a TPU's XLA copy-start/copy-done pairs count once per pair."""
    profile = popprof.open(XPLANE_GPU)
    names = profile.events["name"].astype(str)
    assert int(names.str.startswith("Memcpy DtoD").sum()) == 53
    records = _one_copy_per_event(profile)
    assert sum(r["count"] for r in records if r["kind"] == "DtoD") == 53


def _one_copy_per_event(profile: popprof.Profile) -> list[dict]:
    records = copies.copy_records(profile)
    rows = copies.copy_rows(profile)
    assert bool(rows["transfer"].all()) and len(copies.transfer_mask(profile)) == len(rows)
    per_group = rows.groupby(["rank", "device", "kind"], observed=True).size().to_dict()
    assert records and sum(per_group.values()) == len(rows)
    for r in records:
        key = (-1 if r["rank"] is None else r["rank"], r["device"], r["kind"])
        assert r["count"] == r["ops"] == per_group[key]
    return records
