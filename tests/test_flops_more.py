"""Reductions, normalisations, backward convolutions and the convolution output join, on real traces.

TraceLens's per-call figures (``per_call`` in ``fixtures/real/traces/tracelens_reference.json``, written by
``make_tracelens_reference.py`` with TraceLens itself) cover every operator either tool models on the real
traces, with or without GPU time; the rest are checked against what the traces themselves record.
"""

from __future__ import annotations

import json
from math import prod
from pathlib import Path

import pytest

import popprof
from popprof.metrics import flops, operations, peaks

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
REFERENCE = json.loads((REAL / "tracelens_reference.json").read_text("utf-8"))
RESNET = REAL / "kineto2021_resnet50_worker0.pt.trace.json.gz"
A100_NO_DEVICE = REAL / "hta_a100_no_device_activity.json.gz"
PER_CALL = [(trace, g) for trace, groups in REFERENCE["per_call"].items() for g in groups]


def _within(ours: float, theirs: float, tolerance: float = 0.02) -> bool:
    return abs(ours - theirs) <= tolerance * abs(theirs)


@pytest.fixture(scope="module")
def resnet() -> operations.pd.DataFrame:
    return operations.operations(popprof.open(RESNET, with_args=True))


def test_per_call_reference_covers_reductions_and_three_traces():
    names = {g["name"] for _, g in PER_CALL}
    assert {"aten::sum", "aten::mean", "aten::cumsum", "aten::max"} <= names
    assert len({trace for trace, g in PER_CALL if g["name"] in flops.MODELLED}) >= 3


def test_every_per_call_figure_matches_tracelens():
    compared = 0
    for trace, group in PER_CALL:
        if group["name"] not in flops.MODELLED:
            continue
        cost = flops.model(group["name"], group["input_dims"], group["input_types"], group["concrete_inputs"])
        label = f"{trace}: {group['name']} {group['input_dims']}"
        assert cost is not None, label
        assert _within(cost.flops, group["flops_per_call"]), label
        if group["bytes_per_call"] is not None:
            assert _within(cost.bytes, group["bytes_per_call"]), label
        compared += 1
    assert compared >= 100


def test_resnet50_2021_forward_convolutions_get_flops_from_their_backward_calls(resnet):
    """The 2021 trace records no Concrete Inputs: each forward convolution's output comes from the backward
    node with its sequence number, so every forward convolution that launched work has a figure."""
    forward = resnet[resnet["name"] == "aten::cudnn_convolution"]
    assert len(forward) > 10 and forward["flops_per_call"].notna().all()
    assert (forward["bound"] == "compute").any()  # the V100's fp32 peak applies (V100 (other))


def test_resnet50_stem_output_agrees_with_the_stride_and_padding_model(resnet):
    """torchvision's ResNet-50 stem is a 7x7 convolution with stride 2, padding 3: the Concrete-Inputs model
    with those gives the same FLOPs as the output shape joined from the backward call."""
    convs = resnet[resnet["name"] == "aten::cudnn_convolution"]
    stem = convs[convs["input_shapes"].map(lambda d: d[1][2] == 7)]
    assert len(stem) == 1
    x, w = stem["input_shapes"].iloc[0][:2]
    concrete = ["", "", "", "[2, 2]", "[3, 3]", "[1, 1]", "False", "[0, 0]", "1"]
    by_stride = flops.model("aten::convolution", [x, w, []], ["float", "float", ""], concrete)
    assert by_stride is not None and _within(float(stem["flops_per_call"].iloc[0]), by_stride.flops, 1e-9)


def test_resnet50_backward_convolution_is_twice_the_forward(resnet):
    """TraceLens's convention: the input and the weight gradient each cost the forward convolution."""
    convs = resnet[resnet["name"] == "aten::cudnn_convolution"]
    fwd = {
        (tuple(d[0]), tuple(d[1])): f
        for d, f in zip(convs["input_shapes"], convs["flops_per_call"], strict=True)
    }
    backward = resnet[resnet["name"] == "aten::cudnn_convolution_backward"]
    assert len(backward) > 10
    paired = 0
    for dims, value in zip(backward["input_shapes"], backward["flops_per_call"], strict=True):
        x, _, w = dims[:3]
        forward = fwd.get((tuple(x), tuple(w)))
        if forward is not None and not operations.pd.isna(forward):
            assert _within(float(value), 2 * float(forward), 1e-9)
            paired += 1
    assert paired > 10


def test_layer_norm_on_a_real_a100_trace_without_concrete_inputs():
    """The HTA A100 trace records layer norms without Concrete Inputs: normalized_shape comes from the
    weight's shape. Between 5 and 6 FLOPs per element (statistics and the affine transform), and far below
    the A100's fp32 ridge point: memory-bound, as a normalisation is."""
    profile = popprof.open(A100_NO_DEVICE, with_args=True)
    events = profile.events
    rows = events[events["name"].astype(str) == "aten::native_layer_norm"]
    assert len(rows) > 10
    ridge = peaks.peak("A100 40GB", "fp32").ridge
    for text in rows["args"]:
        args = json.loads(text)
        cost = flops.model("aten::native_layer_norm", args["Input Dims"], args["Input type"])
        elements = prod(args["Input Dims"][0])
        assert cost is not None and 5 <= cost.flops / elements <= 6
        assert cost.bytes >= 2 * 4 * elements and cost.flops / cost.bytes < ridge


@pytest.mark.parametrize(
    ("name", "dims", "types"),
    [
        ("aten::native_layer_norm", [[1024, 512], [], [], []], ["float", "", "", ""]),  # no shape, no weight
        ("aten::_fused_rms_norm", [[4, 0], [], [], []], ["float", "", "", ""]),
        ("aten::convolution_backward", [[1, 2, 3, 3], [1, 2, 5, 5]], ["float", "float"]),
        (
            "aten::_scaled_dot_product_flash_attention_backward",
            [[1, 2], [1], [1], [1]],
            ["c10::BFloat16"] * 4,
        ),
        ("aten::sum", [], []),
    ],
)
def test_shapes_that_do_not_fit_give_no_figure(name, dims, types):
    assert flops.model(name, dims, types) is None


def test_vllm_rms_norms_on_b200_are_memory_bound_and_below_the_memory_roof():
    """vLLM's own RMS norms (no TraceLens model) on the real B200 trace: memory-bound, and the modelled bytes
    over the measured time stay under the B200's memory bandwidth (a model moving more bytes than the
    hardware can would show above it)."""
    table = operations.operations(popprof.open(REAL / "tracelens_b200_vllm_eager.json.gz", with_args=True))
    norms = table[table["name"].isin(["_C::rms_norm", "_C::fused_add_rms_norm"])]
    assert set(norms["name"]) == {"_C::rms_norm", "_C::fused_add_rms_norm"}
    assert (norms["category"] == "normalization").all() and (norms["bound"] == "memory").all()
    assert (norms["tbps"] < norms["peak_tbps"]).all() and (norms["tbps"] > 0.1 * norms["peak_tbps"]).all()


def test_attention_backward_on_the_mi300x_traces_shapes_is_two_and_a_half_forwards():
    """TraceLens's flash backward: five GEMMs (recomputed QK^T, dV, dP, dQ, dK) against the forward's two,
    so 2.5 x the forward on the same real Q, K, V shapes (MHA, no causal mask), and causal halves both."""
    table = operations.operations(
        popprof.open(REAL / "tracelens_mi300x_torch_compile_triton.json.gz", with_args=True)
    )
    sdpa = table[table["name"] == "aten::_scaled_dot_product_flash_attention"]
    assert len(sdpa)
    for dims, types, forward in zip(
        sdpa["input_shapes"], sdpa["input_types"], sdpa["flops_per_call"], strict=True
    ):
        q, k, v = dims[:3]
        grad = [q, q, k, v, q, [q[0], q[1], q[2]]]
        name = "aten::_scaled_dot_product_flash_attention_backward"
        backward = flops.model(name, grad, [types[0]] * 6, [""] * 11 + ["False"])
        causal = flops.model(name, grad, [types[0]] * 6, [""] * 11 + ["True"])
        assert backward is not None and _within(backward.flops, 2.5 * float(forward), 1e-9)
        assert causal is not None and _within(causal.flops, backward.flops / 2, 1e-9)


def test_resnet50_batch_norms_backward_modelled_forward_without_the_training_flag_not(resnet):
    """The 2021 trace's cudnn batch norm backward calls get TraceLens's BatchNormBwd figures (memory-bound,
    under the V100's 0.9 TB/s); the forward calls record no training flag, so no figure, only their time."""
    backward = resnet[resnet["name"] == "aten::cudnn_batch_norm_backward"]
    assert len(backward) > 5 and backward["flops_per_call"].notna().all()
    assert (backward["bound"] == "memory").all() and (backward["tbps"] < backward["peak_tbps"]).all()
    forward = resnet[resnet["name"] == "aten::cudnn_batch_norm"]
    assert len(forward) and forward["flops_per_call"].isna().all() and (forward["device_time_us"] > 0).all()
