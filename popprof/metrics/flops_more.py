"""FLOPs and bytes per call of reductions, normalisations, softmax and backward operators.

The second half of the FLOPs models (``metrics/flops.py`` has GEMM, convolution, attention and elementwise
and dispatches here). The counting conventions follow AMD TraceLens's performance models
(``TraceLens/PerfModel/perf_model.py``, commit 171dd747, MIT; read, not copied; ``docs/operations.md`` has
the table and where popprof departs from it):

- **Reductions** (``Reduce``): one FLOP per input element; bytes = the input read and the output written.
  The output is one element (``cumsum`` / ``cumprod``: as many as the input), as TraceLens counts it on
  Kineto traces, whose ``Concrete Inputs`` are text it does not parse as dimensions.
- **Normalisations** (``Normalization``, ``RMSNorm``): with N elements and C "channels" (batch / group
  norm: ``x[1]``; layer / RMS norm: the product of ``normalized_shape``, from ``Concrete Inputs`` or else
  the weight's shape, which equals it), ``2N + 6C`` FLOPs, ``+ 3N`` when the statistics are computed
  (training; always for layer and group norm); bytes = the activation read and written, plus C elements
  per parameter tensor (mean and variance, weight, bias; mean and variance written again in training). A
  batch norm without ``Concrete Inputs`` has no figure (training or not is unknown). Batch norm backward
  (``BatchNormBwd``): see :func:`_batch_norm_backward`. RMS norm: ``(N / C) * (2C + 2) + N`` (``+ N``
  more with a weight); bytes = input and output, plus the weight.
- **vLLM's RMS norms** (``_C::rms_norm``, ``_C::fused_add_rms_norm``; TraceLens has no model): counted as
  ``RMSNorm`` with a weight; the fused one adds the residual first (``+ N`` FLOPs) and reads and writes
  both the input and the residual (``4N + C`` elements).
- **Softmax** (``Softmax``): ``3 * N`` FLOPs, bytes = input and output; its backward twice that.
- **Convolution backward** (``CONV.flops_bwd``): the input gradient and the weight gradient each cost the
  forward convolution, ``2 * prod(weight[1:]) * prod(grad_output)``, plus ``prod(grad_output)`` for a bias
  gradient. ``grad_output`` is recorded, so no stride or padding is needed (also for PyTorch 1.x's
  ``aten::cudnn_convolution_backward``, whose arguments start ``input, grad_output, weight``; TraceLens
  has no model for it).
- **Attention backward** (``SDPA.flops_bwd`` with the flash recomputation): five GEMMs of ``2*B*H*Nq*Nkv*d``
  (recomputed QK^T, dV, dP, dQ, dK), plus the GQA reductions, halved when causal with ``Nq == Nkv``; bytes
  = Q, K, V, dO read and dQ, dK, dV written.

Like :func:`popprof.metrics.flops.model`, each function is plain Python over one operator's shapes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from math import prod
from typing import NamedTuple


class Cost(NamedTuple):
    """One call's modelled cost: FLOPs, bytes moved and the recorded dtype whose peak applies."""

    flops: float | None
    bytes: float | None
    dtype: object


_REDUCE = {
    "aten::sum",
    "aten::mean",
    "aten::max",
    "aten::min",
    "aten::norm",
    "aten::linalg_norm",
    "aten::std",
    "aten::var",
    "aten::logsumexp",
    "aten::cumsum",
    "aten::cumprod",
    "aten::amin",
    "aten::amax",
}
_SOFTMAX = {"aten::softmax", "aten::_softmax", "aten::log_softmax", "aten::_log_softmax"}
_SOFTMAX_BACKWARD = {"aten::_softmax_backward_data", "aten::_log_softmax_backward_data"}
#: batch norm variants: (input, weight, bias, running_mean, running_var, training, ...)
_BATCH_NORM = {
    "aten::batch_norm",
    "aten::native_batch_norm",
    "aten::cudnn_batch_norm",
    "aten::miopen_batch_norm",
}
#: batch norm backward: cudnn / miopen (input, grad_output, weight, ...), native (grad_out, input, weight,
#: running_mean, running_var, save_mean, save_invstd, train, ...)
_BATCH_NORM_BACKWARD = {
    "aten::cudnn_batch_norm_backward",
    "aten::miopen_batch_norm_backward",
    "aten::native_batch_norm_backward",
}
#: layer norm variants: (input, normalized_shape, weight, bias, ...)
_LAYER_NORM = {"aten::layer_norm", "aten::native_layer_norm"}
#: group norm: (input, num_groups, weight, bias, ...)
_GROUP_NORM = {"aten::group_norm"}
#: RMS norm: (input, normalized_shape, weight, eps)
_RMS_NORM = {"aten::rms_norm", "aten::_fused_rms_norm"}
#: vLLM's RMS norms (no TraceLens model): ``_C::rms_norm(out, input, weight, eps)`` and
#: ``_C::fused_add_rms_norm(input, residual, weight, eps)`` (residual += input; input = norm(residual))
_VLLM_RMS_NORM = {"_C::rms_norm"}
_VLLM_FUSED_ADD_RMS_NORM = {"_C::fused_add_rms_norm"}
_CONV_BACKWARD = {"aten::convolution_backward"}
#: PyTorch 1.x's cudnn backward: (input, grad_output, weight, ...), no bias gradient
_CUDNN_CONV_BACKWARD = {"aten::cudnn_convolution_backward"}
#: attention backward -> the index of ``is_causal`` in its arguments
_ATTENTION_BACKWARD = {
    "aten::_scaled_dot_product_flash_attention_backward": 11,
    "aten::_scaled_dot_product_efficient_attention_backward": 11,
}

NAMES: frozenset[str] = frozenset(
    _REDUCE
    | _SOFTMAX
    | _SOFTMAX_BACKWARD
    | _BATCH_NORM
    | _BATCH_NORM_BACKWARD
    | _LAYER_NORM
    | _GROUP_NORM
    | _RMS_NORM
    | _VLLM_RMS_NORM
    | _VLLM_FUSED_ADD_RMS_NORM
    | _CONV_BACKWARD
    | _CUDNN_CONV_BACKWARD
    | set(_ATTENTION_BACKWARD)
)


def model(
    name: str, dims: list, types: list, concrete: list | None, size: Callable[[object], int | None]
) -> Cost | None:
    """The cost of one call of ``name`` (one of :data:`NAMES`); ``size`` gives bytes per element of a dtype.
    None when the shapes do not fit the model or a dtype is unknown."""
    if name in _REDUCE:
        return _reduce(name, dims, types, size)
    if name in _SOFTMAX or name in _SOFTMAX_BACKWARD:
        return _softmax(dims, types, size, backward=name in _SOFTMAX_BACKWARD)
    if name in _BATCH_NORM:
        flag = _text(concrete, 5).lower()
        if flag not in ("true", "false"):  # no Concrete Inputs: training or not is unknown, so no figure
            return None
        return _norm(dims, types, size, dims[0][1], affine=_has(dims, 1), bias=True, training=flag == "true")
    if name in _BATCH_NORM_BACKWARD:
        return _batch_norm_backward(name, dims, types, concrete, size)
    if name in _LAYER_NORM:
        channels = _normalized(dims, concrete)
        if channels is None:
            return None
        return _norm(dims, types, size, channels, affine=_has(dims, 2), bias=_has(dims, 3), training=True)
    if name in _GROUP_NORM:
        return _norm(dims, types, size, dims[0][1], affine=_has(dims, 2), bias=True, training=True)
    if name in _RMS_NORM:
        return _rms_norm(dims, types, concrete, size)
    if name in _VLLM_RMS_NORM:
        return _vllm_rms_norm(dims, types, size, fused_add=False)
    if name in _VLLM_FUSED_ADD_RMS_NORM:
        return _vllm_rms_norm(dims, types, size, fused_add=True)
    if name in _CONV_BACKWARD:
        return _conv_backward(dims, types, size)
    if name in _CUDNN_CONV_BACKWARD:
        return _conv_backward([dims[1], dims[0], dims[2]], [types[1], types[0], types[2]], size)
    if name in _ATTENTION_BACKWARD:
        return _attention_backward(dims, types, size, _text(concrete, _ATTENTION_BACKWARD[name]) == "True")
    return None


def _text(concrete: list | None, index: int) -> str:
    return str(concrete[index]) if concrete and len(concrete) > index else ""


def _ints(text: str) -> list[int]:
    return [int(v) for v in re.findall(r"-?\d+", text)]


def _has(dims: list, index: int) -> bool:
    return len(dims) > index and bool(dims[index])


def _reduce(name: str, dims: list, types: list, size: Callable[[object], int | None]) -> Cost | None:
    n = prod(dims[0])
    out = n if name in ("aten::cumsum", "aten::cumprod") else 1
    b = size(types[0])
    return Cost(float(n), None if b is None else float((n + out) * b), types[0])


def _softmax(dims: list, types: list, size: Callable[[object], int | None], backward: bool) -> Cost | None:
    n = prod(dims[0])
    b = size(types[0])
    factor = 2 if backward else 1
    return Cost(factor * 3.0 * n, None if b is None else factor * 2.0 * n * b, types[0])


def _norm(
    dims: list,
    types: list,
    size: Callable[[object], int | None],
    channels: int,
    affine: bool,
    bias: bool,
    training: bool,
) -> Cost | None:
    n = prod(dims[0])
    flops = 2.0 * n + 6.0 * channels + (3.0 * n if training else 0.0)
    tensors = 2 + (1 if affine else 0) + (1 if affine and bias else 0) + (2 if training else 0)
    b = size(types[0])
    moved = None if b is None else float((2 * n + tensors * channels) * b)
    return Cost(flops, moved, types[0])


def _batch_norm_backward(
    name: str, dims: list, types: list, concrete: list | None, size: Callable[[object], int | None]
) -> Cost | None:
    """TraceLens's ``BatchNormBwd``: the input gradient ``4N`` (dot products) ``+ 2N`` (scale), plus ``3C``
    for the inverse deviation when it is not saved (cudnn / miopen: TraceLens reads them as not training) or
    ``+ 5N`` instead of ``2N`` in training; bytes = grad_output and the input read, grad_input written, the
    weight and the saved deviation read, the weight and bias gradients written in training."""
    native = name == "aten::native_batch_norm_backward"
    training = False
    if native:
        flag = _text(concrete, 7).lower()
        if flag not in ("true", "false"):
            return None
        training = flag == "true"
    x = dims[1] if native else dims[0]
    n, channels = prod(x), x[1]
    affine = _has(dims, 2)
    flops = channels * (0 if training else 3) + 4.0 * n + (5.0 * n if training else 2.0 * n)
    dtype = types[1] if native else types[0]
    b = size(dtype)
    if b is None:
        return None
    elements = n + n * (2 if training else 1) + (channels if training else 0)
    elements += (channels + (2 * channels if training else 0)) if affine else 0
    return Cost(float(flops), float(elements * b), dtype)


def _normalized(dims: list, concrete: list | None) -> int | None:
    """Elements of a layer / RMS norm's ``normalized_shape``: from ``Concrete Inputs`` (as TraceLens), else
    the weight's shape (which equals it), else None."""
    shape = _ints(_text(concrete, 1)) or (list(dims[2]) if _has(dims, 2) else [])
    return prod(shape) if shape else None


def _rms_norm(
    dims: list, types: list, concrete: list | None, size: Callable[[object], int | None]
) -> Cost | None:
    channels = _normalized(dims, concrete)
    if not channels:
        return None
    n = prod(dims[0])
    affine = _has(dims, 2)
    flops = n / channels * (2.0 * channels + 2) + n * (2 if affine else 1)
    b = size(types[0])
    moved = None if b is None else float((2 * n + (channels if affine else 0)) * b)
    return Cost(flops, moved, types[0])


def _vllm_rms_norm(
    dims: list, types: list, size: Callable[[object], int | None], fused_add: bool
) -> Cost | None:
    """vLLM's RMS norms, counted as TraceLens's ``RMSNorm`` with a weight; the fused one adds the residual
    first (one FLOP per element) and reads and writes both tensors."""
    x, weight = (dims[0], dims[2]) if fused_add else (dims[1], dims[2])
    n, channels = prod(x), prod(weight)
    if not channels or n % channels:
        return None
    flops = n / channels * (2.0 * channels + 2) + 2.0 * n + (n if fused_add else 0)
    b = size(types[1])
    elements = (4 * n if fused_add else 2 * n) + channels
    return Cost(flops, None if b is None else float(elements * b), types[1])


def _conv_backward(dims: list, types: list, size: Callable[[object], int | None]) -> Cost | None:
    grad_out, x, w = dims[0], dims[1], dims[2]
    if len(x) < 3 or len(w) != len(x) or len(grad_out) != len(x) or types[1] != types[2]:
        return None
    bias = _has(dims, 3)
    one = 2.0 * prod(w[1:]) * prod(grad_out)
    flops = 2 * one + (prod(grad_out) if bias else 0)
    b = size(types[1])
    elements = 2 * (prod(grad_out) + prod(w) + prod(x)) + ((prod(grad_out) + grad_out[1]) if bias else 0)
    return Cost(flops, None if b is None else float(elements * b), types[1])


def _attention_backward(
    dims: list, types: list, size: Callable[[object], int | None], causal: bool
) -> Cost | None:
    q, k, v = dims[1], dims[2], dims[3]  # (grad_out, query, key, value, ...), each [B, H, N, d]
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        return None
    b, hq, nq, dqk = q
    _, hkv, nkv, _ = k
    dv = v[3]
    gemm_qk = 2.0 * b * hq * nq * nkv * dqk
    gemm_v = 2.0 * b * hq * nq * nkv * dv
    gqa = hq // hkv - 1 if hkv else 0
    flops = 3 * gemm_qk + 2 * gemm_v + b * nkv * (dv + dqk) * gqa
    if causal and nq == nkv:
        flops /= 2
    e = size(types[1])
    elements = 2 * (b * nq * hq * dqk + b * nkv * hkv * dqk + b * nkv * hkv * dv) + b * nq * hq * dv
    return Cost(flops, None if e is None else float(elements * e), types[1])
