"""GPU operators (metrics/operations.py, flops.py, peaks.py) on real traces: attribution, models, peaks."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

import popprof
from popprof.metrics import flops, operations, peaks

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
B200 = REAL / "tracelens_b200_vllm_eager.json.gz"
MI300X = REAL / "tracelens_mi300x_torch_compile_triton.json.gz"


@pytest.fixture(scope="module")
def mi300x() -> popprof.Profile:
    return popprof.open(MI300X, with_args=True)


def test_gemm_counts_two_mnk_plus_the_bias():
    # addmm(bias[N], A[M,K], B[K,N]) on the DLRM trace's shapes: 2*16*128*256 + 16*128
    cost = flops.model("aten::addmm", [[128], [16, 256], [256, 128], [], []], ["float"] * 3 + ["Scalar"] * 2)
    assert cost.flops == 2 * 16 * 128 * 256 + 16 * 128
    assert cost.bytes == (16 * 256 + 256 * 128 + 16 * 128 + 128) * 4
    assert cost.dtype == "fp32"
    linear = flops.model("aten::linear", [[4, 8, 32], [64, 32], [64]], ["c10::BFloat16"] * 3)
    assert linear.flops == 2 * 32 * 64 * 32 + 32 * 64 and linear.dtype == "bf16"
    batched = flops.model("aten::bmm", [[16, 16, 27], [16, 27, 27]], ["float", "float"])
    assert batched.flops == 16 * 2 * 16 * 27 * 27


def test_convolution_output_size_from_stride_padding_and_dilation():
    dims = [[32, 64, 56, 56], [128, 64, 3, 3], [], [], [], [], [], [], []]
    concrete = ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]
    cost = flops.model("aten::convolution", dims, ["c10::Half"] * 2 + [""] * 7, concrete)
    assert cost.flops == 2 * 64 * 3 * 3 * (32 * 128 * 28 * 28)
    assert flops.model("aten::convolution", dims, ["c10::Half"] * 2, None) is None  # no strides: no figure


def test_causal_attention_is_half():
    dims = [[2, 8, 1024, 64]] * 3 + [[]] * 4
    types = ["c10::BFloat16"] * 3 + ["Scalar"] * 4
    full = flops.model("aten::_scaled_dot_product_flash_attention", dims, types, ["", "", "", "0.0", "False"])
    causal = flops.model(
        "aten::_scaled_dot_product_flash_attention", dims, types, ["", "", "", "0.0", "True"]
    )
    assert full.flops == 4 * 2 * 8 * 1024 * 1024 * 64
    assert causal.flops == full.flops / 2


def test_unknown_operator_or_shape_has_no_model():
    assert flops.model("aten::foo", [[2]], ["float"]) is None
    assert flops.model("aten::mm", [[2, 3], [4, 5]], ["float", "float"]) is None  # K differs


def test_peaks_every_row_has_a_public_source_and_the_devices_asked_for():
    table = peaks.device_peaks()
    assert table["source"].str.contains("https://").all()
    for device in ("V100", "A100", "H100", "H200", "B200", "MI250X", "MI300X", "MI350X", "MI355X", "RTX"):
        assert table["device"].str.contains(device).any(), device
    assert peaks.match_device("NVIDIA B200") == "B200 (HGX)"
    assert peaks.match_device("NVIDIA A100-PG509-200") == "A100 40GB"
    assert peaks.match_device("NVIDIA A100-SXM4-80GB") == "A100 SXM4 80GB"
    assert peaks.match_device("NVIDIA H200") == "H200 SXM"
    assert peaks.match_device("AMD Radeon Graphics") is None


def test_peaks_say_dense_or_vector_and_where_each_figure_is():
    """Every row says which peak it is (a vector unit's, or a matrix unit's without sparsity) and names the
    place of the figure in its document (a column or table of the specifications)."""
    table = peaks.device_peaks()
    assert set(table["kind"]) == {"vector", "matrix dense"}
    assert table.loc[table["dtype"].isin(["fp16", "bf16", "fp8", "tf32"]), "kind"].eq("matrix dense").all()
    assert table["source"].str.contains("column|Table|table|Specifications").all()
    assert not table.duplicated(["device", "dtype"]).any()


@pytest.mark.parametrize(
    ("name", "device"),
    [
        ("NVIDIA GB200", "B200 (GB200)"),  # before the B200 row, whose pattern it also matches
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),  # not the L4
        ("Tesla V100-SXM2-32GB", "V100 SXM2"),  # the DLRM traces' GPU
        ("Tesla V100-PCIE-16GB", "V100 PCIe"),
        ("Tesla V100-DGXS-32GB", "V100 (other)"),  # the 2021 ResNet-50 trace's GPU
        ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
        ("AMD Instinct MI355X", "MI355X"),  # ROCm's own name of the GPU, as its Kineto traces write it
        ("AMD Instinct MI350X", "MI350X"),
        ("AMD Instinct MI350X or MI355X", None),  # the gfx950 signature's name: two GPUs, two sets of peaks
        ("AMD Instinct MI325X", "MI325X"),
        ("AMD Instinct MI300X", "MI300X"),
        ("AMD Instinct MI250X", "MI250X (one GCD)"),  # a process sees one of the board's two GCDs
        ("AMD Instinct MI250", "MI250 (one GCD)"),  # not the MI250X's row
        ("AMD Instinct MI210", "MI210"),
        ("NVIDIA GeForce RTX 3090", None),  # an unknown GPU: no peak, bound stays null
    ],
)
def test_device_matching_order(name, device):
    assert peaks.match_device(name) == device


def test_operations_on_mi300x_gemm_compute_bound(mi300x):
    table = operations.operations(mi300x)
    assert list(table.columns[: len(operations.COLUMNS)]) == list(operations.COLUMNS)
    mm = table[table["name"] == "aten::mm"]
    assert len(mm) == 3 and set(mm["bound"]) == {"compute"}
    assert (mm["tflops"] < mm["peak_tflops"]).all()
    attention = table[table["category"] == "attention"]
    assert attention["name"].tolist() == ["aten::_scaled_dot_product_flash_attention"]
    # every kernel with a launching operator is counted once: the table's time is the attributed work's
    work = operations.attributed_work(mi300x)
    assert table["device_time_us"].sum() == pytest.approx(work["dur_us"].sum())
    kernels = operations.operation_kernels(mi300x)
    assert kernels["device_time_us"].sum() == pytest.approx(work["dur_us"].sum())
    assert operations.operations_note(mi300x) is None


def test_without_arguments_time_per_operator_and_a_note():
    profile = popprof.open(B200)
    table = operations.operations(profile)
    assert not table.empty and table["flops_per_call"].isna().all() and table["input_shapes"].isna().all()
    assert operations.operations_note(profile) == operations.NOTE_NOT_READ
    shaped = operations.operations(popprof.open(B200, with_args=True))
    assert table["device_time_us"].sum() == pytest.approx(shaped["device_time_us"].sum())


def test_records_have_exactly_the_columns(mi300x):
    records = operations.operation_records(mi300x, top=3)
    assert len(records) == 3
    assert all(list(r) == list(operations.COLUMNS) for r in records)
    assert records[0]["bound"] == "compute" and isinstance(records[0]["count"], int)


def test_text_summary_shows_the_top_operators_in_80_columns(mi300x):
    from popprof.metrics.summary import summarise
    from popprof.report.summary import render_text

    text = render_text(summarise(mi300x))
    part = text[text.index("Top GPU operators") :].split("\n\n")[0].splitlines()
    assert all(len(line) <= 80 for line in part)
    assert "compute" in part[2] and "aten::mm" in part[2]  # the largest first: the 2048 x 8192 GEMM


def test_breakdown_levels_add_up(mi300x):
    table = operations.operations(mi300x)
    levels = operations.categories(mi300x)
    assert levels["device_time_us"].sum() == pytest.approx(table["device_time_us"].sum())
    assert levels["category"].iloc[0] == "gemm"


@pytest.mark.parametrize(
    "dims, types",
    [
        ({"a": 1}, ["float"]),
        ([[2, "x"], [3, 4]], ["float", "float"]),
        ([[2, None], [None, 4]], ["float", "float"]),
        ([], []),
        ([[10**30, 10**30], [10**30, 10**30]], ["float", "float"]),
    ],
)
def test_shapes_not_as_recorded_give_no_figure_and_no_error(dims, types):
    for name in ("aten::mm", "aten::addmm", "aten::linear", "aten::matmul", "aten::add", "aten::copy_"):
        cost = flops.model(name, dims, types, ["[1, 1]"] * 9)
        assert cost is None or cost.flops is None or cost.flops >= 0


def test_one_operator_on_two_rows_says_which_shapes_each_is():
    """The real DLRM step: c10d::alltoall_base_ ran with two input shapes, two rows of the top operators that
    read the same; below-roofline named aten::mm twice. Each now says its inputs (io.names.shape_words)."""
    from click.testing import CliRunner

    from popprof.cli import cli
    from popprof.io.names import shape_words
    from popprof.rules import check

    assert shape_words([[512], [16, 512], [512, 512], [], []]) == "512, 16x512, 512x512"
    assert shape_words([[[16, 512], [16, 512]], []]) == "[16x512, 16x512]"  # a tensor list (aten::cat)
    assert shape_words(None) == shape_words([[], []]) == ""
    assert shape_words([[1, 2, 3, 4]] * 6, width=20) == "1x2x3x4, 1x2x3x4,..."

    result = CliRunner().invoke(cli, ["summary", str(REAL / "dlrm_8ranks"), "-q"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output[-2000:]
    table = result.stdout[result.stdout.index("Top GPU operators") :].split("\n\n")[0].splitlines()
    assert max(map(len, table)) <= 80
    rows = [i for i, line in enumerate(table) if line.rstrip().endswith("c10d::alltoall_base_")]
    assert len(rows) == 2
    assert [table[i + 1].strip() for i in rows] == ["inputs 24, 24", "inputs 384, 384"]
    assert not any("inputs" in line for line in table if "All2All_Pooled_Req" in line)  # one row: no shapes

    (finding,) = check(
        popprof.open(REAL / "dlrm_8ranks", with_args=True), rules=["operations.below-roofline"]
    ).items
    assert "aten::mm (16x512, 512x512) 145.0 us" in finding.message
    assert "aten::mm (16x16, 16x128) 114.0 us" in finding.message


def test_the_html_report_gives_every_operator_row_its_inputs(tmp_path):
    from click.testing import CliRunner

    from popprof.cli import cli

    out = tmp_path / "r.html"
    result = CliRunner().invoke(cli, ["report", str(REAL / "dlrm_8ranks"), "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output[-2000:]
    html = out.read_text()
    table = html[html.index('<table class="operations">') :].split("</table>")[0]
    assert "<th>inputs</th>" in table
    assert (
        "<code>24, 24</code>" in table and "<code>384, 384</code>" in table and "<code>128x48</code>" in table
    )


def test_a_backward_node_is_named_by_the_node_not_the_engine():
    """The real DLRM step's top operators showed "autograd::engine::eval... #1" and "#2": the autograd engine's
    prefix, which every backward row shares, filled the 28 columns. The node's name is what tells them apart."""
    from click.testing import CliRunner

    from popprof.cli import cli
    from popprof.io.names import operator_name

    engine = "autograd::engine::evaluate_function: "
    assert operator_name(engine + "torch::autograd::AccumulateGrad", 28) == "AccumulateGrad"
    assert operator_name(engine + "All2All_Pooled_WaitBackward", 28) == "All2All_Pooled_WaitBackward"
    assert operator_name(engine + "X", 90) == engine + "X"  # whole where it fits
    assert operator_name("aten::mm", 28) == "aten::mm"
    result = CliRunner().invoke(cli, ["summary", str(REAL / "dlrm_8ranks"), "-q"], env={"COLUMNS": "80"})
    table = result.stdout[result.stdout.index("Top GPU operators") :].split("\n\n")[0]
    assert "autograd::engine" not in table
    assert table.count("AccumulateGrad") == 1 and "All2All_Pooled_WaitBackward" in table


def test_signatures_every_row_has_a_public_source_and_names_a_device_of_the_peaks():
    """A signature names one device of the peaks, or GPUs it cannot tell apart: then (``A or B``) the name
    matches no row only when their peaks differ, and each of them has its own rows (no silent pick)."""
    table = peaks.device_signatures()
    assert table["source"].str.contains("https://").all()
    assert not table.duplicated(
        ["compute_major", "compute_minor", "sms", "memory_min_gib", "clock_mhz"]
    ).any()
    ambiguous = 0
    for name in table["name"]:
        device = peaks.match_device(name)
        if device is not None:
            continue
        ambiguous += 1
        head, _, tail = name.rpartition(" or ")
        assert head, name  # a name no row matches must say which GPUs it may be
        vendor = head.rsplit(" ", 1)[0]
        devices = [peaks.match_device(head), peaks.match_device(f"{vendor} {tail}")]
        assert None not in devices and devices[0] != devices[1], (name, devices)
        assert peaks.peak(devices[0], "bf16") != peaks.peak(devices[1], "bf16")._replace(device=devices[0])
    assert ambiguous == 1  # the gfx950 row: an MI350X or an MI355X


def test_mi355x_and_mi350x_peaks_are_the_same_silicon_at_two_clocks():
    """CDNA 4's two boards: every MI350X figure is the MI355X's at 2200/2400 MHz (each rounded to 0.1),
    the same 8 TB/s, no tf32 row (CDNA 4 has no TF32 matrix hardware) and one fp64 row (the vector figure)."""
    table = peaks.device_peaks()
    fast = table[table["device"] == "MI355X"].set_index("dtype")
    slow = table[table["device"] == "MI350X"].set_index("dtype")
    assert sorted(fast.index) == sorted(slow.index) == ["bf16", "fp16", "fp32", "fp64", "fp8"]
    for dtype in fast.index:
        assert slow.loc[dtype, "tflops"] == pytest.approx(fast.loc[dtype, "tflops"] * 2200 / 2400, abs=0.1)
        assert fast.loc[dtype, "kind"] == slow.loc[dtype, "kind"]
    assert set(fast["memory_tbps"]) == set(slow["memory_tbps"]) == {8.0}
    assert fast.loc["bf16", "tflops"] == pytest.approx(2400e6 * 1024 * 1024 / 1e12, abs=0.05)  # clock x cores
    assert fast.loc["fp8", "tflops"] == 2 * fast.loc["bf16", "tflops"]
    # 256 CUs x 256 fp32 / 128 fp64 FLOP per clock
    assert fast.loc["fp32", "tflops"] == pytest.approx(2400e6 * 256 * 256 / 1e12, abs=0.05)
    assert fast.loc["fp64", "tflops"] == pytest.approx(2400e6 * 256 * 128 / 1e12, abs=0.05)


def test_the_mi350x_signature_is_what_a_real_mi350x_reports():
    """rocprofv3's agent records of a real MI350X (``rocprofv3_mi350_train``, a training run captured on one) give
    the figures its signature row and its peaks rest on: product name "AMD Instinct MI350X", gfx950 (HIP's 9.5),
    256 CUs, a 2200 MHz peak engine clock (the MI355X's is 2400): the row the clock picks is that GPU."""
    with gzip.open(REAL / "rocprofv3_mi350_train.json.gz", "rt") as handle:
        document = json.load(handle)
    agents = [a for a in document["rocprofiler-sdk-tool"][0]["agents"] if a["type"] == 2]
    assert agents and {(a["product_name"], a["gfx_target_version"], a["cu_count"]) for a in agents} == {
        ("AMD Instinct MI350X", 90500, 256)
    }
    (clock,) = {a["max_engine_clk_fcompute"] for a in agents}
    props = {"computeMajor": 9, "computeMinor": 5, "numSms": 256, "totalGlobalMem": 288 * 2**30}
    assert peaks.named_by_signature({**props, "clockRate": clock * 1000}) == "AMD Instinct MI350X"
    assert peaks.match_device("AMD Instinct MI350X") == "MI350X"
    assert peaks.named_by_signature(props) == "AMD Instinct MI350X or MI355X"


def _gfx950_variant(tmp_path: Path, name: str) -> Path:
    """The vLLM decode trace (ROCm 7, ``"name": ""``) with its GPUs' properties made a gfx950's: 9.5, 256 CUs
    and the 309,220,868,096 B TraceLens's MI355X XPlane records; ``name`` as the trace gives it."""
    with gzip.open(REAL / "tracelens_mi300x_vllm_decode_graph.json.gz", "rt") as handle:
        trace = json.load(handle)
    for props in trace["deviceProperties"]:
        props.update(name=name, computeMinor=5, numSms=256, totalGlobalMem=309220868096)
    out = tmp_path / "gfx950.json"
    out.write_text(json.dumps(trace))
    return out


def test_an_unnamed_gfx950_is_named_both_and_gets_no_roof(tmp_path):
    """Kineto's deviceProperties hold no clock, so a nameless gfx950 is an MI350X or an MI355X, whose peaks
    differ by 9 %: it is named both, and its operators keep FLOPs and rates but no peak and no bound."""
    profile = popprof.open(_gfx950_variant(tmp_path, ""), with_args=True)
    assert peaks.profile_device(profile) == ("AMD Instinct MI350X or MI355X", None)
    mm = operations.operations(profile).query("name == 'aten::mm'").iloc[0]
    assert mm["flops_per_call"] == 2 * 32 * 2880 * 201088 and mm["tflops"] > 100
    assert pd.isna(mm["peak_tflops"]) and pd.isna(mm["peak_tbps"]) and mm["bound"] is None


def test_a_named_mi355x_gets_its_own_roof(tmp_path):
    """The same trace with ROCm's name for the GPU: the MI355X's bf16 roof, and the LM head's GEMM is
    memory-bound (intensity about 32 FLOP per byte, far below the ridge of 315)."""
    profile = popprof.open(_gfx950_variant(tmp_path, "AMD Instinct MI355X"), with_args=True)
    assert peaks.profile_device(profile) == ("AMD Instinct MI355X", "MI355X")
    mm = operations.operations(profile).query("name == 'aten::mm'").iloc[0]
    assert (mm["peak_tflops"], mm["peak_tbps"]) == (2516.6, 8.0)
    assert mm["bound"] == "memory" and mm["tbps"] / 8.0 == pytest.approx(4.23 / 8.0, abs=0.01)


def test_a_rocm7_gpu_without_a_name_is_named_by_its_properties():
    """ROCm 7's Kineto writes ``"name": ""`` (TraceLens's vLLM decode trace on an MI300X: gfx942, 304 CUs,
    192 GiB): the GPU is named by its properties, so its operators get the MI300X's roofline; the GEMM of its
    LM head, 32 x 2,880 by 2,880 x 201,088 bf16, is memory-bound."""
    path = (
        Path(__file__).resolve().parent.parent
        / "fixtures/real/traces/tracelens_mi300x_vllm_decode_graph.json.gz"
    )
    with gzip.open(path, "rt") as handle:
        props = json.load(handle)["deviceProperties"]
    assert {p["name"] for p in props} == {""}
    assert (props[0]["computeMajor"], props[0]["computeMinor"], props[0]["numSms"]) == (9, 4, 304)
    profile = popprof.open(path, with_args=True)
    assert peaks.profile_device(profile) == ("AMD Instinct MI300X", "MI300X")
    table = operations.operations(profile)
    mm = table[table["name"] == "aten::mm"].iloc[0]
    assert mm["input_shapes"] == [[32, 2880], [2880, 201088]]
    assert mm["flops_per_call"] == 2 * 32 * 2880 * 201088
    assert (mm["peak_tflops"], mm["peak_tbps"]) == (1307.4, 5.3)
    assert mm["bound"] == "memory" and mm["tbps"] / 5.3 == pytest.approx(0.80, abs=0.01)


@pytest.mark.parametrize(
    ("props", "name"),
    [
        (
            {"computeMajor": 9, "computeMinor": 4, "numSms": 304, "totalGlobalMem": 206141652992},
            "AMD Instinct MI300X",
        ),
        (
            {"computeMajor": 9, "computeMinor": 4, "numSms": 304, "totalGlobalMem": 274877906944},
            "AMD Instinct MI325X",
        ),
        (
            {"computeMajor": 9, "computeMinor": 4, "numSms": 228, "totalGlobalMem": 137438953472},
            None,
        ),  # MI300A
        (  # an MI210 or one GCD of an MI250: the same peaks per GPU
            {"computeMajor": 9, "computeMinor": 0, "numSms": 104, "totalGlobalMem": 68702699520},
            "AMD Instinct MI210 or MI250 (one GCD)",
        ),
        (  # gfx950, 256 CUs, 288 GiB: an MI350X or an MI355X, named both (their peaks differ)
            {"computeMajor": 9, "computeMinor": 5, "numSms": 256, "totalGlobalMem": 309220868096},
            "AMD Instinct MI350X or MI355X",
        ),
        (  # the clock an XPlane GPU plane records tells the two apart: 2400 MHz is the MI355X's
            {
                "computeMajor": 9,
                "computeMinor": 5,
                "numSms": 256,
                "totalGlobalMem": 309220868096,
                "clockRate": 2400000,
            },
            "AMD Instinct MI355X",
        ),
        (  # a clock no row names leaves the rows without one (the MI300X's 2100 MHz: its one row)
            {
                "computeMajor": 9,
                "computeMinor": 4,
                "numSms": 304,
                "totalGlobalMem": 206141652992,
                "clockRate": 2100000,
            },
            "AMD Instinct MI300X",
        ),
        (  # an MI100 (gfx908): no row
            {"computeMajor": 9, "computeMinor": 0, "numSms": 120, "totalGlobalMem": 34342961152},
            None,
        ),
        ({"computeMajor": 9, "computeMinor": 4, "numSms": 304}, None),  # no memory: not identified
    ],
)
def test_named_by_signature_only_where_one_row_matches(props, name):
    assert peaks.named_by_signature(props) == name


def test_a_generic_name_gives_way_to_the_properties_and_a_known_name_does_not():
    """The MI250 toy names its GPU 'AMD Radeon Graphics' (no peak row): its properties (gfx90a, 104 CUs,
    64 GiB) name it, and its operators get the MI210's roofline, which is an MI250 GCD's too; the TraceLens MI210
    trace's own name is kept."""
    toy = popprof.open(REAL / "amd_mi250_minitoy.json.gz")
    assert peaks.device_properties(toy)[0]["name"] == "AMD Radeon Graphics"
    assert peaks.profile_device(toy) == ("AMD Instinct MI210 or MI250 (one GCD)", "MI210")
    for dtype in ("fp64", "fp32", "fp16", "bf16"):
        mi210, gcd = peaks.peak("MI210", dtype), peaks.peak("MI250 (one GCD)", dtype)
        assert mi210.tflops == pytest.approx(gcd.tflops, rel=0.003) and mi210.tbps == gcd.tbps == 1.6
    mi210 = popprof.open(REAL / "tracelens_mi210_gpu_only.json.gz")
    assert peaks.profile_device(mi210) == ("AMD Instinct MI210", "MI210")
