"""Public vocabulary that stays readable after redaction (documented in docs/redaction.md).

Everything here is public: Poplar program types, memory categories, step
categories, the SDK's trace channels, PopLibs / framework vertex and codelet
names, PyTorch and CUDA runtime names, Chrome-trace structural values, and
popprof's own table, column and metric names. Users extend it with
``--keep PATTERN`` or ``keep = [...]`` in the policy (see :mod:`.policy`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..schema import PROGRAM_TYPE_CATEGORY, STEP_CATEGORIES, TABLES

PROGRAM_TYPES = frozenset(PROGRAM_TYPE_CATEGORY) | {
    "Repeat", "RepeatWhileTrue", "RepeatWhileFalse", "Sequence", "OnEveryTileSwitch", "Call", "If", "Switch",
    "Copy", "WriteUndef", "AssumeEqualAcrossReplicas", "CrossReplicaCopy", "StreamCopy", "Execute",
    "ProgramPrint", "Abort", "Loop",
}

MEMORY_CATEGORIES = frozenset({
    "vertexCode", "vertexInstanceState", "vectorListDescriptor", "copyDescriptor", "vertexFieldData",
    "controlCode", "internalExchangeCode", "globalExchangeCode", "hostExchangeCode", "constant", "variable",
    "stack", "instrumentationResults", "sharedCodeStorage", "sharedDataStorage", "hostExchangePacketHeader",
    "globalExchangePacketHeader", "controlTable", "rearrangement", "outputEdge", "messageBuffer",
    # text-summary labels and popprof's normalised labels
    "Variables", "Constants", "Host Exchange Packet Headers", "Global Exchange Packet Headers", "Stack",
    "Vertex Instances", "Copy Descriptors", "VectorList Descriptors", "Vertex Field Data", "Control Table",
    "Control Code", "Vertex Code", "Internal Exchange Code", "Host Exchange Code", "Global Exchange Code",
    "Instrumentation Results", "Shared Code Storage", "Shared Data Storage", "Non-interleaved", "Interleaved",
    "Overflowed", "including_gaps", "excluding_gaps", "Including Gaps", "Excluding Gaps", "total", "region",
    "data_type", "vertex_category", "vertex_type", "maximum", "per_ipu", "Total", "Vertex Data",
})

CHANNELS = frozenset({"Drivers", "Poplar", "Framework", "popart", "poptorch", "PopART", "PopTorch", "libpva",
                      "pvti", "Host", "IPU", "Device", "host", "device"})
LAYERS = frozenset({"poplibs", "popart", "onnx", "poptorch", "xla_op", "tensorflow", "poplar"})
TARGET_VALUES = frozenset({"ipu1", "ipu2", "ipu21", "bow", "Ipu", "IpuModel", "Cpu", "Unknown", "synth",
                           "pop", "pvti", "bundle", "text_summary", "sdk1_json", "chrome_trace", "archive",
                           "baseline"})
ENGINE_NAMES = frozenset({"training", "inference", "validation", "evaluation", "profile", "main"})

#: Chrome trace structural values and common categories (Chrome, PyTorch profiler, Perfetto).
CHROME_VALUES = frozenset({
    "thread_name", "process_name", "thread_sort_index", "process_sort_index", "process_labels",
    "process_uptime_seconds", "__metadata", "cpu_op", "kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime",
    "cuda_driver", "python_function", "user_annotation", "gpu_user_annotation", "ac2g", "fwdbwd", "Trace",
    "Memcpy", "Memset", "Runtime", "Kernel", "ProfilerStep", "Iteration", "ms", "ns", "us", "compute",
    "exchange", "host_io", "sync", "other", "global_exchange", "CPU", "GPU", "MainThread", "main",
})

#: Poplar engine/runtime event labels seen in SDK traces.
SDK_EVENTS = frozenset({"Engine::run", "Engine::load", "Engine::prepare", "Engine::connectStream",
                        "Engine::readTensor", "Engine::writeTensor", "Compile", "Compilation", "Execution",
                        "Graph construction", "Graph Construction", "Lowering", "Load", "Run", "Sync",
                        "StreamCopy", "Host", "Barrier", "Wait"})

DTYPES = frozenset({"half", "float", "float16", "float32", "float64", "bfloat16", "int", "int8", "int16",
                    "int32", "int64", "uint8", "uint16", "uint32", "bool", "char", "unsigned", "fp16", "fp32",
                    "true", "false", "null", "none", "None", "True", "False", "NCHW", "NHWC"})

#: Public C++ namespaces (PopLibs, Poplar, frameworks, PyTorch/CUDA) whose vertex/op names stay readable.
PUBLIC_NAMESPACES = ("poplin", "popops", "popnn", "poprand", "poputil", "popfloat", "popsparse", "poplar",
                     "poplibs", "popart", "poptorch", "gcl", "popdist", "pva", "pvti", "libpvti", "aten",
                     "c10", "torch", "at", "std", "cudnn", "cublas", "tensorflow", "xla", "ipu")

PUBLIC_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"(?:{})::[A-Za-z_][\w:<>,.*&\[\]-]*(?:, [\w:<>,.*&\[\]-]+)*".format(
        "|".join(PUBLIC_NAMESPACES))),
    re.compile(r"graphConstruction/[A-Za-z]\w*"),
    re.compile(r"cuda[A-Z]\w*|cu[A-Z]\w*|nccl[A-Z].*|rccl[A-Z].*|hip[A-Z]\w*"),
    re.compile(r"Mem(?:cpy|set)(?: [A-Za-z]+)?(?: \([^()]*\))?"),
    # versions (at most three parts: never an IPv4 address), dates and times
    re.compile(r"v?\d+\.\d+(?:\.\d+)?(?:[-+][A-Za-z0-9]+)?"),
    re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
               r"|\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?"),
    re.compile(r"Program \d+(?: \(main\))?"),
    re.compile(r"ProfilerStep#\d+"),  # the PyTorch profiler's own step annotations (diff compares per step)
    re.compile(r"python(?:\d(?:\.\d+)?)?(?:\.exe)?|pt_main_thread|pool-\d+-thread-\d+|Thread-\d+"),
)

#: Public internet names that are not the user's infrastructure.
PUBLIC_HOSTS = frozenset({"graphcore.ai", "docs.graphcore.ai", "github.com", "pypi.org", "python.org",
                          "pytorch.org", "tensorflow.org", "huggingface.co", "localhost"})


def _popprof_names() -> frozenset[str]:
    names: set[str] = set(TABLES)
    for spec in TABLES.values():
        names.update(spec.column_names)
    try:
        from ..metrics import METRICS

        names.update(METRICS)
    except ImportError:  # pragma: no cover
        pass
    return frozenset(names)


BASE_WORDS: frozenset[str] = (PROGRAM_TYPES | MEMORY_CATEGORIES | frozenset(STEP_CATEGORIES) | CHANNELS | LAYERS
                              | TARGET_VALUES | ENGINE_NAMES | CHROME_VALUES | SDK_EVENTS | DTYPES
                              | _popprof_names())


class Allowlist:
    """Decides whether a string is public vocabulary (kept as it is)."""

    def __init__(self, extra_words: Iterable[str] = (), extra_patterns: Iterable[re.Pattern[str]] = ()) -> None:
        self.words = set(BASE_WORDS) | set(extra_words)
        self.patterns = list(PUBLIC_PATTERNS) + list(extra_patterns)
        self._combined = re.compile("|".join(f"(?:{p.pattern})" for p in self.patterns))
        self._cache: dict[str, bool] = {}

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, str):
            return False
        hit = self._cache.get(value)
        if hit is None:
            hit = value in self.words or self._combined.fullmatch(value) is not None
            self._cache[value] = hit
        return hit
