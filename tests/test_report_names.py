"""Issue 28: diff rows of GPU traces were 2,000 characters wide (full C++ kernel names) in text and
Markdown; tables now shorten long names, JSON keeps them whole."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import popprof
from popprof.compare import diff
from popprof.io.names import NAME_WIDTH, fold_brackets, kernel_word, kernel_words, short_name, short_names
from popprof.report.diff import render
from popprof.testing import synth

#: A kernel name shaped like the ones in Kineto traces, padded to about 2,000 characters.
KERNEL = (
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<"
    + "at::native::BinaryFunctor<float, float, float, at::native::MulFunctor<float> >, " * 24
    + "int> >(at::TensorIteratorBase&, "
    + "at::native::ReduceOp<float, at::native::MeanOps<float, float>, unsigned int, float, 4>, " * 2
    + ")"
)


def test_short_names_fold_template_and_parameter_lists():
    assert len(KERNEL) > 1_900
    assert fold_brackets(KERNEL) == "void at::native::elementwise_kernel<...>(...)"
    # the plain template arguments and a recognisable prefix of the one naming the work stay
    assert (
        short_name(KERNEL)
        == "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<...>>(...)"
    )
    assert short_name(KERNEL, 60) == "void at::native::elementwise_kernel<..., gpu_kernel...>(...)"
    assert short_name("forward", 60) == "forward"
    assert fold_brackets("bool operator<(int)") is None  # brackets that do not pair: cut instead
    cut = short_name("x" * 30 + " operator<" + "y" * 80, 60)
    assert len(cut) == 60 and cut.endswith("...")


def _events(names: list[str], durations: list[float]) -> pd.DataFrame:
    n = len(names)
    return pd.DataFrame(
        {
            "event_id": np.arange(n),
            "pid": np.full(n, 100),
            "tid": np.full(n, 7),
            "parent_id": [None] * n,
            "depth": np.zeros(n, dtype=np.int16),
            "name": names,
            "channel": ["cuda"] * n,
            "start_us": np.arange(n, dtype=float) * 1_000.0,
            "dur_us": durations,
        }
    )


@pytest.fixture(scope="module")
def result():
    base = synth.make_profile(num_steps=200, num_liveness_steps=20, seed=3)
    old, new = base.copy(), base.copy()
    names = [KERNEL, KERNEL.replace("MulFunctor", "AddFunctor"), "memcpy"]
    old.set_table("events", _events(names, [100.0, 200.0, 5.0]))
    new.set_table("events", _events(names, [180.0, 90.0, 5.0]))
    return diff(old, new)


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_diff_tables_shorten_long_names(result, fmt):
    text = render(result, fmt=fmt)
    assert max(len(line) for line in text.splitlines()) <= (80 if fmt == "text" else 200)
    text = " ".join(text.split())  # the text's names have lines of their own, wrapped at 80 columns
    # two kernels that differ deep inside (MulFunctor, AddFunctor) read the same shortened, even as wide as a
    # summary shows names (their template list, report.diff._shown_names): numbered
    assert "elementwise_kernel<128, 2, at::native::gpu_kernel_impl<...>>(...) #1" in text
    assert "elementwise_kernel<128, 2, at::native::gpu_kernel_impl<...>>(...) #2" in text
    assert " ".join(KERNEL.split()) not in text


def test_diff_json_keeps_full_names(result):
    doc = json.loads(render(result, fmt="json"))
    assert KERNEL in json.dumps(doc)


#: The real NCCL trace (fixtures/real/traces/README.md): three cutlass GEMMs, two vectorized_elementwise_kernel
#: and two bn_bw_1C11_kernel_new instantiations among its top kernels.
NCCL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces" / "nccl_data.json.gz"


def test_real_top_kernels_keep_distinct_short_names():
    """Issue 41: `void cutlass::Kernel<...>(...)` three times in `popprof summary` of the NCCL trace."""
    from popprof.metrics.summary import summarise
    from popprof.report.summary import render_text

    doc = summarise(popprof.open(NCCL))
    kernels = [k["name"] for k in doc["trace"]["top_kernels"]]
    assert len(set(kernels)) == len(kernels) >= 10
    shown = short_names(kernels)
    assert len(set(shown)) == len(shown)  # no two different kernels read the same
    assert all(len(s) <= NAME_WIDTH for s in shown)
    gemms = [s for s in shown if s.startswith("void cutlass::Kernel<")]
    assert len(gemms) == 3 and all("cutlass_80_tensorop_s1688gemm_" in s for s in gemms)
    text = render_text(doc, width=200)  # a wide terminal: each name after its figures, in its column
    for name in shown:
        assert name in text
    for name in kernels:  # the table shows the shortened names, and only them
        assert len(name) <= NAME_WIDTH or name not in text
    # in 80 columns each name goes under its figures (6 columns in) and is shortened further, still apart
    narrow = render_text(doc).splitlines()
    under = short_names(kernels, width=80 - 6)
    assert len(set(under)) == len(under)
    for name in under:
        assert "      " + name in narrow


def test_names_that_still_read_the_same_are_numbered_in_order():
    a = "void k<" + "x" * 200 + "A>(int)"
    b = "void k<" + "x" * 200 + "B>(int)"
    shown = short_names([a, b, a, "memcpy"], 40)
    assert shown[0].endswith(" #1") and shown[1].endswith(" #2") and shown[2] == shown[0]
    assert shown[3] == "memcpy" and all(len(s) <= 40 for s in shown)
    assert shown[0].removesuffix(" #1") == shown[1].removesuffix(" #2")


@pytest.mark.parametrize(
    ("name", "width", "expected"),
    [
        # the plain arguments when they fit
        (
            "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, true, 1>(float, "
            + "float, " * 20
            + "float)",
            90,
            "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, true, 1>(...)",
        ),
        # as many plain arguments as fit
        (
            "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>(int)",
            66,
            "void cudnn::ops::nchwToNhwcKernel<float, float, float, ...>(...)",
        ),
        # the functor, without its namespaces
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
            "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
            90,
            "void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<float>, ...>(...)",
        ),
    ],
)
def test_short_name_keeps_what_tells_kernels_apart(name, width, expected):
    assert short_name(name, width) == expected


def test_real_top_kernels_distinct_in_the_html_report(tmp_path):
    pytest.importorskip("matplotlib")
    from click.testing import CliRunner

    from popprof.cli import cli

    target = tmp_path / "report.html"
    result = CliRunner().invoke(cli, ["report", str(NCCL), "-o", str(target)])
    assert result.exit_code == 0, result.output
    html = target.read_text()
    gemms = re.findall(r"<code>(void cutlass::Kernel&lt;[^<]*)</code>", html)
    assert len(gemms) == 3 and len(set(gemms)) == 3


@pytest.mark.parametrize(
    ("name", "word"),
    [  # kernel names of TraceLens's real H100 and B200 traces (fixtures/real/traces)
        (
            "std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type "
            "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long, c10::BFloat16*, "
            "c10::BFloat16 const*, float, int, int)",
            "vllm::fused_add_rms_norm_kernel",
        ),
        (
            "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, "
            "float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, "
            "c10::BFloat16*)",
            "at::native::vectorized_layer_norm_kernel",
        ),
        (
            "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<at::native::"
            "CUDAFunctor_add<float> >(at::TensorIteratorBase&, at::native::CUDAFunctor_add<float> const&)::"
            "{lambda(int)#1}>(int, at::native::gpu_kernel_impl<at::native::CUDAFunctor_add<float> >("
            "at::TensorIteratorBase&, at::native::CUDAFunctor_add<float> const&)::{lambda(int)#1})",
            "at::native::elementwise_kernel",
        ),
        (  # too wide: the outer namespaces go first
            "moe::dev::routing::routingRenormalize::routingIndicesHistogramScoresKernel<moe::dev::routing::"
            "routingRenormalize::KernelParams<float, __nv_bfloat16, 128, 4, true, true> >(moe::dev::routing::"
            "routingRenormalize::KernelParams<float, __nv_bfloat16, 128, 4, true, true>)",
            "routingIndicesHistogramScoresKernel",
        ),
        ("Memcpy DtoD (Device -> Device)", "Memcpy DtoD"),
        ("ampere_sgemm_128x64_tn", "ampere_sgemm_128x64_tn"),
        ("triton_poi_fused__to_copy_1", "triton_poi_fused__to_copy_1"),
    ],
)
def test_a_sentence_names_a_kernel_by_its_callable(name: str, word: str) -> None:
    assert kernel_word(name) == word


def test_kernel_words_number_different_kernels_that_read_the_same() -> None:
    gemm = "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(P::Params)"
    relu = (
        "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8>(P::Params)"
    )
    assert kernel_words([gemm, relu, gemm, "Memcpy DtoD (Device -> Device)"]) == [
        "cutlass::Kernel2 #1",
        "cutlass::Kernel2 #2",
        "cutlass::Kernel2 #1",
        "Memcpy DtoD",
    ]
    assert kernel_word("x" * 60) == "x" * 45 + "..."
