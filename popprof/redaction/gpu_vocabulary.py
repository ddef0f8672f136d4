"""Structural vocabulary of the GPU profiling ecosystems (PyTorch profiler / Kineto, CUDA, NCCL):
Kineto's categories and keys (from ``vocabulary/kineto.json`` plus the trace-level values the
profiler writes), memcpy / memset kinds and strictly anchored patterns of generated labels.

The names themselves are data (``vocabulary/kineto.json``, ``vocabulary/pytorch_profiler.json``);
this module only says how they combine. Code names (ATen operators, autograd nodes, CUDA/HIP calls,
NCCL and cuBLAS/cuDNN/CUTLASS kernels, C++ kernel signatures) are decided by :mod:`.names` from the
vocabulary files. Nothing here is a bare prefix: ``nccl:<anything>``, ``c10d::<anything>``, ``prim::<anything>`` and
``Memcpy HtoD (<free text>)`` are not public; each pattern lists its whole names.
"""

from __future__ import annotations

import re

from . import vocabulary

_PROFILER = vocabulary.data("pytorch_profiler.json")
_KINETO = vocabulary.data("kineto.json")

#: Kineto activity categories and trace-level structural values (``kineto.json``, and the values of
#: ``pytorch_profiler.json``: device and backend words, dtypes, categories of older releases).
KINETO_CATEGORIES: frozenset[str] = frozenset(_KINETO["categories"]) | frozenset(_PROFILER["trace_values"])

#: Kineto trace metadata keys, event keys and ``args`` keys (both files).
KINETO_KEYS: frozenset[str] = (
    frozenset(_KINETO["trace_keys"]) | frozenset(_KINETO["arg_keys"]) | frozenset(_PROFILER["trace_keys"])
)
#: Record functions PyTorch names by a fixed text (``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__``).
RECORD_FUNCTIONS: frozenset[str] = frozenset(_PROFILER["record_functions"])


def _names(key: str) -> str:
    """An alternation of one list of ``pytorch_profiler.json`` (longest first, escaped)."""
    return "|".join(re.escape(w) for w in sorted(_PROFILER[key], key=len, reverse=True))


_MEM_KIND = r"(?:HtoD|DtoH|DtoD|HtoH|PtoP|AtoH|HtoA|AtoD|DtoA|AtoA)"
_MEM_PLACE = r"(?:Pageable|Pinned|Device|Host|Managed|Array|Unknown|Peer)"
_KNOWN_OPTIMIZERS = _names("optimizers")
#: Collectives of PyTorch's process-group record functions (``nccl:all_reduce``) and c10d operators
#: (``c10d::allreduce_``), as torch.distributed names them.
_COLLECTIVES = _names("collectives")
#: TorchScript ``prim::`` operators that profiles record.
_PRIM_OPS = _names("prim_operators")

#: Anchored patterns (each must match the whole string).
GPU_PATTERNS: tuple[str, ...] = (
    r"ProfilerStep#\d+",
    r"PyTorch Profiler \(\d+\)",
    rf"Memcpy {_MEM_KIND}(?: \({_MEM_PLACE} -> {_MEM_PLACE}\))?",
    rf"Memset(?: \({_MEM_PLACE}\))?",
    _MEM_KIND,
    rf"prim::(?:{_PRIM_OPS})",
    rf"c10d::(?:{_COLLECTIVES})_?",
    rf"(?:nccl|rccl|gloo|mpi|ucc):(?:{_COLLECTIVES})",
    r"torch::autograd::(?:AccumulateGrad|GraphRoot|CopyBackwards|CopySlices|Error|NotImplemented)",
    rf"Optimizer\.(?:step|zero_grad)#(?:{_KNOWN_OPTIMIZERS})\.(?:step|zero_grad)",
    r"(?:thread \d+|stream \d+) ?",  # Kineto thread / stream labels
    # TensorFlow / JAX profiler process and stream labels
    r"/host:CPU|/device:(?:GPU|CPU|TPU|XLA_GPU|XLA_CPU):\d+(?: Compute| stream \d+)?",
    r"Stream #\d+\((?:Compute|MemcpyH2D|MemcpyD2H|MemcpyD2D|MemcpyP2P|NCCL|Memset)\)",
    r"tf_executor|TraceMe|TraceContext|tf_data_iterator_get_next",
    r"(?:GPU|CPU|XPU|MTIA|HPU) ?\d*",
    r"(?:cpu|cuda|gloo|nccl|mpi|ucc)(?::(?:gloo|nccl|mpi|ucc))?(?:,(?:cpu|cuda):(?:gloo|nccl|mpi|ucc))*",
    r"0x[0-9a-fA-F]{1,16}",  # pointers and addresses (numbers)
    r"(?i:cuda|cpu|ipu|gpu|tpu|xla|mps|hip|xpu|meta|mtia)(?::\d+)?",  # torch device strings; popprof's tpu:N
    r"\[[\d\s,.\[\]eE+-]*\]|\d+\.",  # Kineto's number lists and "1." scalars
)
