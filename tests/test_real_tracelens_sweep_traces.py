"""Defects found by sweeping AMD TraceLens's public test traces (``tests/traces`` of AMD-AGI/TraceLens, commit
171dd74721ca1ec45709e5805b68ae1f65e27811, MIT; the fixtures' provenance is in ``fixtures/real/traces/README.md``).

A trace too large to keep here is tested on an excerpt built from a fixture: the fixture's events, one kernel
renamed to the name the large trace records (quoted below verbatim).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import popprof
from popprof.metrics import account, devices
from popprof.metrics.summary import summarise
from popprof.report.summary import render_text
from popprof.trace.device import is_collective

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
COMPILE = REAL / "tracelens_mi300x_torch_compile_triton.json.gz"

# xDiT's Stable Diffusion 3.5 and FLUX.1 traces (inference/xdit_sd_3.5/profile_trace_rank_0.json.gz, 98 calls;
# inference/xdit_flux.1_aiter_sage/profile_trace_rank_0.json.gz, 49 calls): ATen's float multiply with
# broadcast operands, a compute kernel whose name holds the word "broadcast"
_LAUNCHER = (
    "at::native::(anonymous namespace)::type_specialized_broadcast_kernel_launcher<1>::apply<"
    "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, "
    "std::array<char*, 3ul>, std::array<c10::ScalarType, 3ul>, OffsetCalculator<3, unsigned int, false> >"
    "(long, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, "
    "std::array<char*, 3ul>, std::array<c10::ScalarType, 3ul>, OffsetCalculator<3, unsigned int, false>)"
    "::{lambda(int, bool)#1}"
)
XDIT_MUL = f"void at::native::elementwise_kernel_manual_unroll<128, 4, {_LAUNCHER}>(int, {_LAUNCHER})"
# the resnet_act_checkpoint trace's (mi300/resnet_act_checkpoint.json.gz) collective: 17 calls, 71.5 ms
RCCL_GENERIC = "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)"


def _renamed(tmp_path: Path, old: str, new: str) -> Path:
    """The torch.compile fixture with its one kernel named ``old`` renamed to ``new``, written to ``tmp_path``."""
    with gzip.open(COMPILE, "rt", encoding="utf-8") as handle:
        trace = json.load(handle)
    hits = [e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e["name"] == old]
    assert len(hits) == 1
    hits[0]["name"] = new
    path = tmp_path / "renamed.json"
    path.write_text(json.dumps(trace), encoding="utf-8")
    return path


def test_an_aten_broadcast_kernel_is_compute_not_communication(tmp_path: Path) -> None:
    """xDiT's SD 3.5 trace runs ATen's multiply ``type_specialized_broadcast_kernel_launcher`` 98 times
    (604.9 us) on one MI300X with no collective at all; TraceLens's ``gpu_timeline.csv`` has no communication
    (``total_comm_time`` 0) and HTA's kernel type is COMPUTATION. Before, the word "broadcast" made it a
    collective: 604.9 us of exposed communication in the time account and an ``exchange.share`` finding on a
    single GPU (498.2 us on FLUX.1). Here the torch.compile fixture's SiLU-multiply kernel (527.382 us) takes that
    name: the account's compute stays TraceLens's 12,549.021 us, its communication 0."""
    assert not is_collective(XDIT_MUL)
    assert is_collective(RCCL_GENERIC) and is_collective("ncclKernel_Broadcast_RING_LL_Sum_int8_t")
    profile = popprof.open(_renamed(tmp_path, "triton_poi_fused__unsafe_view_mul_silu_2", XDIT_MUL))
    work = devices.device_work(profile)
    assert (work.loc[work["name"] == XDIT_MUL, "kernel_type"] == "COMPUTATION").all()
    row = account.run_account(profile).iloc[0]
    assert round(row["compute"], 3) == 12549.021
    assert row["communication"] == 0.0


def test_a_collective_kernel_in_the_same_place_is_communication(tmp_path: Path) -> None:
    """The same kernel named as RCCL's generic collective is communication: its 527.382 us (nothing overlaps
    it) leave compute for communication, so the test above can tell the two apart."""
    profile = popprof.open(_renamed(tmp_path, "triton_poi_fused__unsafe_view_mul_silu_2", RCCL_GENERIC))
    row = account.run_account(profile).iloc[0]
    assert round(row["communication"], 3) == 527.382
    assert round(row["compute"], 3) == round(12549.021 - 527.382, 3)


# --- TraceLens's GPU timeline (gpu_timeline.csv) against popprof's time account ---------------------------

REFERENCE = json.loads((REAL / "tracelens_timeline_reference.json").read_text(encoding="utf-8"))
#: fixtures where TraceLens's definitions and popprof's agree: every figure equal
AGREEING = [
    "tracelens_mi210_gpu_only.json.gz",
    "tracelens_mi300x_torch_compile_triton.json.gz",
    "tracelens_mi300x_sglang_decode.json.gz",
    "tracelens_mi300x_vllm_decode_graph.json.gz",
    "tracelens_h100_bert_small.json.gz",
]


def _report(fixture: str) -> dict:
    """TraceLens's report on the trace ``fixture`` copies."""
    return REFERENCE["reports"][REFERENCE["fixtures"][fixture]]


def _run_row(path: Path) -> dict:
    """popprof's one run row of the account (one device), its busy and idle sums added."""
    rows = account.run_account(popprof.open(path))
    assert len(rows) == 1
    row = rows.iloc[0].to_dict()
    return {**row, "busy": account.busy_us(row), "idle": account.idle_us(row)}


def test_the_reference_names_its_commit_and_every_fixture() -> None:
    assert REFERENCE["tracelens"]["commit"] == "171dd74721ca1ec45709e5805b68ae1f65e27811"
    for fixture in REFERENCE["fixtures"]:
        assert (REAL / fixture).is_file()


@pytest.mark.parametrize("fixture", AGREEING)
def test_the_time_account_matches_tracelens_gpu_timeline(fixture: str) -> None:
    """Where both count the same work, popprof's account is TraceLens's ``gpu_timeline.csv`` to the ns: the
    window (TraceLens's ``total_time``: first to last GPU event), busy, idle, compute (``computation_time``),
    exposed communication and exposed copies (``exposed_memcpy_time``). On an MI210 (device 1 of 4), the
    torch.compile and SGLang / vLLM decode runs on MI300X and BERT on an H100."""
    tl = _report(fixture)["gpu_timeline_us"]
    row = _run_row(REAL / fixture)
    assert row["window_us"] == pytest.approx(tl["total_time"], abs=1e-3)
    assert row["busy"] == pytest.approx(tl["busy_time"], abs=1e-3)
    assert row["idle"] == pytest.approx(tl["idle_time"], abs=1e-3)
    assert row["compute"] == pytest.approx(tl["computation_time"], abs=1e-3)
    assert row["communication"] == pytest.approx(tl["exposed_comm_time"], abs=1e-3)
    assert row["copies"] == pytest.approx(tl["exposed_memcpy_time"], abs=1e-3)


@pytest.mark.parametrize("fixture", [f for f in AGREEING if _report(f)["kernel_summary"]])
def test_kernel_counts_and_time_match_tracelens_kernel_summary(fixture: str) -> None:
    """TraceLens's ``kernel_summary.csv`` (its rows summed): as many kernels, the same summed time (its CSV
    keeps each duration to the ns, so the sums differ by under 0.1 ns a kernel)."""
    ks = _report(fixture)["kernel_summary"]
    work = devices.device_work(popprof.open(REAL / fixture))
    kernels = work[work["channel"] == "kernel"]
    assert len(kernels) == ks["count"]
    total = float((kernels["end_exact"] - kernels["start_exact"]).sum())
    assert total == pytest.approx(ks["total_us"], abs=1e-4 * ks["count"])


def _durations(path: Path, category: str) -> list[float]:
    """The ``dur`` of every event of ``category`` in the raw trace."""
    return [e["dur"] for e in _events(path) if e.get("cat") == category]


def _events(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)["traceEvents"]


def test_memsets_are_tracelens_computation_and_popprof_copies() -> None:
    """Falconsai's image classifier on an H100: TraceLens's ``GPUEventAnalyser`` puts ``gpu_memset`` with the
    kernels in ``computation_time``; popprof's account puts memsets in ``copies`` (HTA's MEMORY). Busy, idle
    and the window agree; compute differs by exactly the 2 memsets (4.384 us)."""
    fixture = "tracelens_h100_falconsai_nsfw.json.gz"
    tl = _report(fixture)["gpu_timeline_us"]
    row = _run_row(REAL / fixture)
    memsets = _durations(REAL / fixture, "gpu_memset")
    assert len(memsets) == 2 and round(sum(memsets), 3) == 4.384
    assert row["window_us"] == pytest.approx(tl["total_time"], abs=1e-3)
    assert row["busy"] == pytest.approx(tl["busy_time"], abs=1e-3)
    assert row["idle"] == pytest.approx(tl["idle_time"], abs=1e-3)
    assert row["compute"] + sum(memsets) == pytest.approx(tl["computation_time"], abs=1e-3)
    assert row["copies"] == pytest.approx(sum(memsets), abs=1e-3) and tl["exposed_memcpy_time"] == 0.0


def test_work_tracelens_does_not_link_to_an_operator_is_still_device_time() -> None:
    """TraceLens's normalization-layer test on an MI300X: its report's timeline leaves out GPU work its call
    tree does not link (``include_unlinked_kernels=False``, the default), here the 5 memsets (26.636 us, from
    ``hipMemset`` / ``hipMemsetAsync``). popprof counts all device work: the same window, busy larger by
    exactly those memsets, idle smaller by as much, compute (the 168 kernels) equal."""
    fixture = "tracelens_mi300x_normalization.json.gz"
    tl = _report(fixture)["gpu_timeline_us"]
    row = _run_row(REAL / fixture)
    memsets = sum(_durations(REAL / fixture, "gpu_memset"))
    assert round(memsets, 3) == 26.636
    assert row["window_us"] == pytest.approx(tl["total_time"], abs=1e-3)
    assert row["compute"] == pytest.approx(tl["computation_time"], abs=1e-3)
    assert row["busy"] == pytest.approx(tl["busy_time"] + memsets, abs=1e-3)
    assert row["idle"] == pytest.approx(tl["idle_time"] - memsets, abs=1e-3)
    assert _report(fixture)["kernel_summary"]["count"] == len(_durations(REAL / fixture, "kernel")) == 168


def test_inductor_triton_kernels_belong_to_their_launchers_as_in_tracelens_ops_summary() -> None:
    """torch.compile on an MI300X: each of Inductor's 4 Triton kernels is launched inside a ``cpu_op`` of its own
    name (``triton_poi_fused__unsafe_view_mul_silu_2``, ...), all inside ``Torch-Compiled Region: 0/0``.
    TraceLens's ``ops_summary.csv`` gives each kernel to its launcher. Before, popprof's operators table gave
    the 4 kernels (836.0 us) to the compiled region, an operator that names no kernel; now each launcher has
    TraceLens's calls and kernel time, and the region is gone. ``aten::mm`` (7 calls, 8.03 ms) agrees too."""
    from popprof.metrics import operations

    fixture = "tracelens_mi300x_torch_compile_triton.json.gz"
    tl = _report(fixture)["ops_summary"]
    ops = operations.operations(popprof.open(REAL / fixture, with_args=True))
    by_name = ops.groupby("name")[["count", "device_time_us"]].sum()
    assert "Torch-Compiled Region: 0/0" not in by_name.index
    launchers = [name for name in tl if name.startswith("triton_")]
    assert len(launchers) == 4
    for name in [*launchers, "aten::mm"]:
        assert by_name.loc[name, "count"] == tl[name]["count"]
        assert by_name.loc[name, "device_time_us"] == pytest.approx(
            tl[name]["direct_kernel_time_us"], abs=1e-3
        )


def test_the_leak_scan_reads_python_lists_and_pointers_as_the_redactor_keeps_them() -> None:
    """TraceLens's normalization trace records ``Concrete Inputs`` such as ``[True, False]`` (an output mask,
    Python's repr, not JSON) and ``hipMalloc``'s ``ptr`` (``0x7fffb8facf7c``). The redactor keeps both (public
    words; a pointer is a number), but the leak scan took the first for a JSON document it could not read and
    the second for a word of no vocabulary, so ``popprof redact`` failed its own scan on the real trace (28
    places; ``tests/test_redact_real.py`` redacts every real trace). A real JSON document, or a 32-digit hex
    string (a digest, not a pointer), is still looked for."""
    from popprof.redaction.scan_vocabulary import ScanVocabulary

    raw = _events(REAL / "tracelens_mi300x_normalization.json.gz")
    concrete = {v for e in raw for v in e.get("args", {}).get("Concrete Inputs", [])}
    pointers = {e["args"]["ptr"] for e in raw if "ptr" in e.get("args", {})}
    assert {"[True, False]", "[True, False, False]"} <= concrete and "0x7fffb8facf7c" in pointers
    vocabulary = ScanVocabulary()
    assert all(v in vocabulary for v in concrete | pointers)
    assert '["AcmeSecretProject"]' not in vocabulary
    assert "[AcmeSecretProject, True]" not in vocabulary
    assert "0x" + "ab" * 16 not in vocabulary


def test_long_host_events_on_one_device_name_no_worst_rank() -> None:
    """The normalization test's host sits 331.63 ms in one ``hipLaunchKernel`` (loading code objects) while its
    one MI300X idles: ``host.long-events`` is right to say so, but its gain said "(the worst rank)" of a trace
    with one device and no rank. The words name a worst rank only when there are several."""
    (finding,) = popprof.check(popprof.open(REAL / "tracelens_mi300x_normalization.json.gz")).by_rule(
        "host.long-events"
    )
    basis = " ".join(finding.estimated_gain.basis.split())
    assert basis.startswith("the device idle time during these host events, of its window")
    assert "worst rank" not in basis


def test_the_operators_table_says_how_much_gpu_work_no_operator_launched() -> None:
    """SGLang's decode replays one HIP graph (``hipGraphLaunch``): of its 9.78 ms of GPU work (555 kernels and 3
    copies, 9,778.614 us summed) operators launched 104.6 us; TraceLens's report gives the rest to the operators
    that captured the graph, read from the capture's trace beside it. The text's top operators (53.8 us of
    ``aten::argmax`` first) read as if they were the run's; the summary now says how much of the GPU work
    they hold and why the rest has none. On BERT (H100) operators launched all of it: no such line."""
    sglang = popprof.open(REAL / "tracelens_mi300x_sglang_decode.json.gz")
    raw = _events(REAL / "tracelens_mi300x_sglang_decode.json.gz")
    work = sum(e["dur"] for e in raw if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    summary = summarise(sglang)
    cover = summary["operations_coverage"]
    assert cover["work_us"] == pytest.approx(work, abs=1e-6) and round(work, 3) == 9778.614
    assert round(cover["operators_us"], 1) == 104.6 and cover["graph_launches"] == 1
    assert cover["operators_us"] == pytest.approx(sum(r["device_time_us"] for r in summary["operations"]))
    text = " ".join(render_text(summary, 80).split())
    assert (
        "operators launched 104.6 us of the 9.78 ms of GPU work (1.1 %); no operator encloses the launch of the "
        "rest: 1 graph launch replayed a captured graph, whose operators are in the capture's trace" in text
    )
    bert = summarise(popprof.open(REAL / "tracelens_h100_bert_small.json.gz"))
    assert bert["operations_coverage"]["share"] == pytest.approx(1.0)
    assert "operators launched" not in render_text(bert, 80)
