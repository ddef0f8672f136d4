"""FLOPs and bytes per call of a PyTorch operator from its recorded shapes and dtypes.

The counting conventions follow AMD TraceLens's performance models (``TraceLens/PerfModel/perf_model.py``,
commit 171dd747, MIT; read, not copied; ``docs/operations.md`` says which one each model follows):

- **GEMM** ``C[M,N] = A[M,K] B[K,N]``: ``2*M*N*K`` FLOPs, plus ``M*N`` for the bias of ``addmm`` /
  ``baddbmm`` / ``linear`` with a bias; bytes = A, B and C read or written once, plus a bias of N elements.
  ``bmm`` and ``baddbmm`` multiply by the batch. ``linear`` and ``matmul`` flatten the leading dimensions
  of the first input into M.
- **Convolution** (``aten::convolution``, ``aten::_convolution``, cudnn and miopen): ``2 * prod(weight[1:])``
  per output element (``weight[1]`` is already the input channels per group); the output size from stride,
  padding and dilation (``Concrete Inputs``); without them, no figure.
- **Attention** (SDPA, flash and efficient variants): ``2*B*H*Nq*Nkv*d_qk + 2*B*H*Nq*Nkv*d_v``, halved when
  causal with ``Nq == Nkv``; bytes = Q, K, V read and O written once.
- **Elementwise**: one FLOP per output element; bytes = inputs read and output written once (a binary op's
  output has the broadcast shape, in the wider dtype of two tensors).

Reductions, normalisations, softmax and the backward convolution and attention are in
:mod:`popprof.metrics.flops_more`. One call of :func:`model` is plain Python over one operator's
shapes: callers run it once per distinct (name, shapes, dtypes), never per event.
"""

from __future__ import annotations

import re
from math import prod
from typing import NamedTuple

from . import flops_more

#: bytes per element of the dtype names the PyTorch profiler records (``Input type``), lower case
ELEMENT_BYTES: dict[str, int] = {
    "double": 8,
    "long int": 8,
    "long": 8,
    "c10::complex<float>": 8,
    "float": 4,
    "int": 4,
    "scalar": 4,
    "c10::half": 2,
    "c10::bfloat16": 2,
    "short": 2,
    "c10::float8_e4m3fn": 1,
    "c10::float8_e4m3fnuz": 1,
    "c10::float8_e5m2": 1,
    "c10::float8_e5m2fnuz": 1,
    "unsigned char": 1,
    "signed char": 1,
    "bool": 1,
}

#: the peak table's dtype (``device_peaks.csv``) of a recorded dtype
PEAK_DTYPES: dict[str, str] = {
    "double": "fp64",
    "float": "fp32",
    "c10::half": "fp16",
    "c10::bfloat16": "bf16",
    "c10::float8_e4m3fn": "fp8",
    "c10::float8_e4m3fnuz": "fp8",
    "c10::float8_e5m2": "fp8",
    "c10::float8_e5m2fnuz": "fp8",
}

GEMM, CONV, ATTENTION, ELEMENTWISE = "gemm", "convolution", "attention", "elementwise"
NORM, REDUCE, COMMUNICATION, COPY, OTHER = "normalization", "reduction", "communication", "copy", "other"
#: categories in display order
CATEGORIES: tuple[str, ...] = (GEMM, CONV, ATTENTION, ELEMENTWISE, NORM, REDUCE, COPY, COMMUNICATION, OTHER)

_GEMM = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::linear", "aten::matmul"}
_CONV = {
    "aten::convolution",
    "aten::_convolution",
    "aten::cudnn_convolution",
    "aten::miopen_convolution",
    "aten::conv1d",
    "aten::conv2d",
    "aten::conv3d",
}
_ATTENTION = {
    "aten::scaled_dot_product_attention",
    "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_cudnn_attention",
}
_UNARY = {
    "aten::copy_",
    "aten::copy",
    "aten::clamp_min",
    "aten::clamp_min_",
    "aten::clamp_max",
    "aten::clamp_max_",
    "aten::sigmoid",
    "aten::rsqrt",
    "aten::silu",
    "aten::neg",
    "aten::pow",
    "aten::relu",
    "aten::relu_",
    "aten::gelu",
    "aten::tanh",
    "aten::exp",
}
_BINARY = {
    "aten::add",
    "aten::add_",
    "aten::sub",
    "aten::sub_",
    "aten::mul",
    "aten::mul_",
    "aten::div",
    "aten::div_",
    "aten::sigmoid_backward",
    "aten::threshold_backward",
}
#: operators with a FLOPs model (the attribution prefers the innermost of these)
MODELLED: frozenset[str] = frozenset(_GEMM | _CONV | _ATTENTION | _UNARY | _BINARY | flops_more.NAMES)
_NORM = re.compile(r"norm", re.IGNORECASE)
_GEMM_NAMES = re.compile(r"^aten::(_scaled_mm|addbmm|einsum)$|(Addmm|Mm|Bmm|Baddbmm|Linear|Matmul)Backward")
_CONV_NAMES = re.compile(r"convolution", re.IGNORECASE)
_REDUCE = re.compile(
    r"^aten::(sum|mean|max|min|amax|amin|argmax|argmin|softmax|_softmax|log_softmax|_log_softmax|cumsum|cumprod|logsumexp|std|var)"
)
_COMM = re.compile(r"^(c10d::|nccl:|record_param_comms|_c10d_functional::|symm_mem::)")
_COPY = re.compile(r"^aten::(to|_to_copy|contiguous|clone|index|cat|stack|fill_|zero_|zeros|empty)")


class Cost(NamedTuple):
    """One call's modelled cost: FLOPs, bytes moved and the dtype the peak is read for (None: unknown)."""

    flops: float | None
    bytes: float | None
    dtype: str | None


def category(name: str) -> str:
    """The operator's category (one of :data:`CATEGORIES`) by its name."""
    if name in _GEMM or _GEMM_NAMES.search(name):
        return GEMM
    if name in _CONV or _CONV_NAMES.search(name):
        return CONV
    if name in _ATTENTION or "attention" in name.lower() or "flash_attn" in name.lower():
        return ATTENTION
    if name in _UNARY or name in _BINARY:
        return COPY if name.startswith("aten::copy") else ELEMENTWISE
    if _NORM.search(name):
        return NORM
    if _REDUCE.match(name):
        return REDUCE
    if _COMM.match(name):
        return COMMUNICATION
    if _COPY.match(name):
        return COPY
    return OTHER


def element_bytes(dtype: object) -> int | None:
    """Bytes per element of a recorded dtype name (None when unknown)."""
    return ELEMENT_BYTES.get(str(dtype).lower()) if dtype else None


def peak_dtype(dtype: object) -> str | None:
    """The peak table's dtype of a recorded dtype name (None when it has no peak)."""
    return PEAK_DTYPES.get(str(dtype).lower()) if dtype else None


def model(
    name: str, dims: list, types: list, concrete: list | None = None, output: list | None = None
) -> Cost | None:
    """The cost of one call of operator ``name`` from its ``Input Dims``, ``Input type`` and ``Concrete
    Inputs`` (``output``: a convolution's output shape when known otherwise, :mod:`.conv_outputs`); None
    when the operator has no model or its shapes do not fit one."""
    try:
        if name in _GEMM:
            return _gemm(name, dims, types)
        if name in _CONV:
            return _conv(dims, types, concrete, output)
        if name in _ATTENTION:
            return _attention(name, dims, types, concrete)
        if name in _UNARY:
            return _unary(dims, types)
        if name in _BINARY:
            return _binary(dims, types)
        if name in flops_more.NAMES:
            more = flops_more.model(name, dims, types, concrete, element_bytes)
            return None if more is None else Cost(more.flops, more.bytes, peak_dtype(more.dtype))
    except (
        IndexError,
        KeyError,
        TypeError,
        ValueError,
        AttributeError,
        OverflowError,
        ZeroDivisionError,
    ):  # shapes not as recorded
        return None
    return None


def _bytes(elements: list[tuple[float, object]]) -> float | None:
    sizes = [element_bytes(t) for _, t in elements]
    if any(s is None for s in sizes):
        return None
    return float(sum(n * s for (n, _), s in zip(elements, sizes, strict=True)))


def _gemm(name: str, dims: list, types: list) -> Cost | None:
    batch, bias = 1, False
    if name == "aten::mm":
        a, b = dims[0], dims[1]
        ta, tb = types[0], types[1]
    elif name in ("aten::addmm", "aten::baddbmm"):
        a, b, bias = dims[1], dims[2], True
        ta, tb = types[1], types[2]
    elif name == "aten::bmm":
        a, b = dims[0], dims[1]
        ta, tb = types[0], types[1]
    elif name == "aten::linear":  # weight is [N, K]
        a, w = dims[0], dims[1]
        if len(a) < 1 or len(w) != 2:
            return None
        bias = len(dims) > 2 and bool(dims[2])
        a, b = [prod(a[:-1]), a[-1]], [w[1], w[0]]
        ta, tb = types[0], types[1]
    else:  # aten::matmul: leading dimensions of the first input are rows, a 3-D second input is batched
        a, b = dims[0], dims[1]
        ta, tb = types[0], types[1]
        if len(a) < 2 or len(b) < 2:
            return None
        if len(b) == 2:
            a = [prod(a[:-1]), a[-1]]
        else:
            batch = prod(a[:-2])
            a, b = a[-2:], b[-2:]
    if name in ("aten::bmm", "aten::baddbmm"):
        batch = a[0]
        a, b = a[1:], b[1:]
    if len(a) != 2 or len(b) != 2 or a[1] != b[0]:
        return None
    m, k, n = a[0], a[1], b[1]
    flops = batch * (2.0 * m * n * k + (m * n if bias else 0))
    moved = _bytes(
        [(batch * m * k, ta), (batch * k * n, tb), (batch * m * n, ta)] + ([(n, ta)] if bias else [])
    )
    return Cost(flops, moved, peak_dtype(ta))


def _pair(text: str, spatial: int, default: int) -> list[int]:
    values = [int(v) for v in re.findall(r"-?\d+", text)] if text not in ("", "None") else []
    if not values:
        return [default] * spatial
    return values * spatial if len(values) == 1 else values


def _conv(dims: list, types: list, concrete: list | None, output: list | None = None) -> Cost | None:
    x, w = dims[0], dims[1]
    spatial = len(x) - 2
    if spatial < 1 or len(w) != len(x) or types[0] != types[1]:
        return None
    if output and not concrete:  # the output shape from the backward call: no stride needed
        if len(output) != len(x) or output[0] != x[0] or output[1] != w[0]:
            return None
        return _conv_cost(x, w, list(output), types)
    if not concrete or len(concrete) < 9:
        return None
    stride, padding, dilation = (_pair(concrete[i], spatial, d) for i, d in ((3, 1), (4, 0), (5, 1)))
    if str(concrete[6]).lower() == "true":  # transposed convolution: no model here
        return None
    out_spatial = [
        (x[2 + i] + 2 * padding[i] - dilation[i] * (w[2 + i] - 1) - 1) // stride[i] + 1
        for i in range(spatial)
    ]
    return _conv_cost(x, w, [x[0], w[0], *out_spatial], types)


def _conv_cost(x: list, w: list, out: list, types: list) -> Cost:
    flops = 2.0 * prod(w[1:]) * prod(out)
    return Cost(
        flops, _bytes([(prod(x), types[0]), (prod(w), types[1]), (prod(out), types[0])]), peak_dtype(types[0])
    )


def _flag(concrete: list | None, index: int) -> bool:
    return bool(concrete) and len(concrete) > index and str(concrete[index]).lower() == "true"


def _attention(name: str, dims: list, types: list, concrete: list | None) -> Cost | None:
    q, k, v = dims[0], dims[1], dims[2]
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        return None
    b, hq, nq, dqk = q  # [B, H, N, d]
    _, hkv, nkv, _ = k
    dv = v[3]
    causal_at = {
        "aten::scaled_dot_product_attention": 5,
        "aten::_scaled_dot_product_flash_attention": 4,
        "aten::_scaled_dot_product_efficient_attention": 6,
        "aten::_scaled_dot_product_cudnn_attention": 6,
    }.get(name)
    causal = causal_at is not None and _flag(concrete, causal_at)
    flops = 2.0 * b * hq * nq * nkv * dqk + 2.0 * b * hq * nq * nkv * dv
    if causal and nq == nkv:
        flops /= 2
    moved = _bytes(
        [(b * nq * hq * dqk, types[0]), (b * nkv * hkv * dqk, types[1]), (b * nkv * hkv * dv, types[2])]
        + [(b * nq * hq * dv, types[0])]
    )
    return Cost(flops, moved, peak_dtype(types[0]))


def _unary(dims: list, types: list) -> Cost | None:
    n = prod(dims[0])
    out = types[1] if len(dims) > 1 and dims[1] else types[0]
    return Cost(float(n), _bytes([(n, types[0]), (n, out)]), peak_dtype(types[0]))


def _binary(dims: list, types: list) -> Cost | None:
    a, b = list(dims[0]), list(dims[1])
    rank = max(len(a), len(b))
    a, b = [1] * (rank - len(a)) + a, [1] * (rank - len(b)) + b
    if any(x != y and x != 1 and y != 1 for x, y in zip(a, b, strict=True)):
        return None
    out_n = prod(max(x, y) for x, y in zip(a, b, strict=True))
    if len(dims) > 2 and dims[2]:
        out_type = types[2]
    elif dims[0] and dims[1]:
        sizes = [element_bytes(types[0]) or 0, element_bytes(types[1]) or 0]
        out_type = types[0] if sizes[0] >= sizes[1] else types[1]
    else:
        out_type = types[0]
    moved = _bytes([(prod(dims[0]), types[0]), (prod(dims[1]), types[1]), (out_n, out_type)])
    return Cost(float(out_n), moved, peak_dtype(types[0]))
