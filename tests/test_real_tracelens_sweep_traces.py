"""Defects found by sweeping AMD TraceLens's public test traces (``tests/traces`` of AMD-AGI/TraceLens, commit
171dd74721ca1ec45709e5805b68ae1f65e27811, MIT; the fixtures' provenance is in ``fixtures/real/traces/README.md``).

A trace too large to keep here is tested on an excerpt built from a fixture: the fixture's events, one kernel
renamed to the name the large trace records (quoted below verbatim).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import popprof
from popprof.metrics import account, devices
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
