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

from ..model.schema import PROGRAM_TYPE_CATEGORY, STEP_CATEGORIES, TABLES
from ..readers.bundle import MANIFEST
from ..readers.poplar_labels import DATA_TYPES, REGIONS
from .gpu_vocabulary import GPU_PATTERNS, KINETO_CATEGORIES, KINETO_KEYS, RECORD_FUNCTIONS
from .keynames import SENSITIVE_KEYS
from .names import MESSAGE_WORDS, NameGrammar, label_words, summary_label
from .tokens import chunk_strings, has_space

PROGRAM_TYPES = frozenset(PROGRAM_TYPE_CATEGORY) | {
    "Repeat",
    "RepeatWhileTrue",
    "RepeatWhileFalse",
    "Sequence",
    "OnEveryTileSwitch",
    "Call",
    "If",
    "Switch",
    "Copy",
    "WriteUndef",
    "AssumeEqualAcrossReplicas",
    "CrossReplicaCopy",
    "StreamCopy",
    "Execute",
    "ProgramPrint",
    "Abort",
    "Loop",
}

MEMORY_CATEGORIES = frozenset(
    {
        "vertexCode",
        "vertexInstanceState",
        "vectorListDescriptor",
        "copyDescriptor",
        "vertexFieldData",
        "controlCode",
        "internalExchangeCode",
        "globalExchangeCode",
        "hostExchangeCode",
        "constant",
        "variable",
        "stack",
        "instrumentationResults",
        "sharedCodeStorage",
        "sharedDataStorage",
        "hostExchangePacketHeader",
        "globalExchangePacketHeader",
        "controlTable",
        "rearrangement",
        "outputEdge",
        "messageBuffer",
        # text-summary labels (readers/poplar_labels.py) and popprof's normalised labels
        *DATA_TYPES,
        *REGIONS,
        "including_gaps",
        "excluding_gaps",
        "Including Gaps",
        "Excluding Gaps",
        "total",
        "region",
        "data_type",
        "vertex_category",
        "vertex_type",
        "maximum",
        "per_ipu",
        "Total",
        "Vertex Data",
    }
)

CHANNELS = frozenset(
    {
        "Drivers",
        "Poplar",
        "Framework",
        "popart",
        "poptorch",
        "PopART",
        "PopTorch",
        "libpva",
        "pvti",
        "Host",
        "IPU",
        "Device",
        "host",
        "device",
    }
)
LAYERS = frozenset({"poplibs", "popart", "onnx", "poptorch", "xla_op", "tensorflow", "poplar"})
TARGET_VALUES = frozenset(
    {
        "ipu1",
        "ipu2",
        "ipu21",
        "bow",
        "Ipu",
        "IpuModel",
        "Cpu",
        "Unknown",
        "synth",
        "pop",
        "pvti",
        "bundle",
        "text_summary",
        "sdk1_json",
        "chrome_trace",
        "archive",
        "oom_log",  # every reader's FORMAT name is public (popprof/readers)
        "baseline",
    }
)
ENGINE_NAMES = frozenset({"training", "inference", "validation", "evaluation", "profile", "main"})

#: Chrome trace structural values and common categories (Chrome, PyTorch profiler, Perfetto).
CHROME_VALUES = frozenset(
    {
        "thread_name",
        "process_name",
        "thread_sort_index",
        "process_sort_index",
        "process_labels",
        "process_uptime_seconds",
        "__metadata",
        "cpu_op",
        "kernel",
        "gpu_memcpy",
        "gpu_memset",
        "cuda_runtime",
        "cuda_driver",
        "python_function",
        "user_annotation",
        "gpu_user_annotation",
        "ac2g",
        "fwdbwd",
        "Trace",
        "Memcpy",
        "Memset",
        "Runtime",
        "Kernel",
        "ProfilerStep",
        "Iteration",
        "ms",
        "ns",
        "us",
        "compute",
        "exchange",
        "host_io",
        "sync",
        "other",
        "global_exchange",
        "CPU",
        "GPU",
        "MainThread",
        "main",
    }
)

#: Poplar engine/runtime event labels seen in SDK traces.
SDK_EVENTS = frozenset(
    {
        "Engine::run",
        "Engine::load",
        "Engine::prepare",
        "Engine::connectStream",
        "Engine::readTensor",
        "Engine::writeTensor",
        "Compile",
        "Compilation",
        "Execution",
        "Graph construction",
        "Graph Construction",
        "Lowering",
        "Load",
        "Run",
        "Sync",
        "StreamCopy",
        "Host",
        "Barrier",
        "Wait",
    }
)

DTYPES = frozenset(
    {
        "half",
        "float",
        "float16",
        "float32",
        "float64",
        "bfloat16",
        "int",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "bool",
        "char",
        "unsigned",
        "fp16",
        "fp32",
        "true",
        "false",
        "null",
        "none",
        "None",
        "True",
        "False",
        "NCHW",
        "NHWC",
    }
)

#: Anchored patterns of public names (each must match the WHOLE string; no bare prefixes).
PUBLIC_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p)
    for p in (
        r"graphConstruction/(?:poplin|popops|popnn|poprand|popsparse|popfloat|poputil|poplar|popart|poptorch|gcl)",
        # versions: at most three numeric parts (never an IPv4 address), PEP 440 pre/post/dev tags only
        r"v?\d+\.\d+(?:\.\d+)?(?:(?:a|b|rc|\.post|\.dev)\d+)?(?:\+(?:cpu|cu\d{2,3}|rocm\d+(?:\.\d+)*|xpu))?",
        r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
        r"|\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?",
        r"Program \d+(?: \(main\))?",
        r"python(?:\d(?:\.\d+)?)?(?:\.exe)?|pt_main_thread|pt_autograd_\d+|pool-\d+-thread-\d+|Thread-\d+",
        r"[A-Za-z]",  # one-letter structural values (ph, s, bp)
        r"hmac-sha256:[0-9a-f]{12}",  # a redaction key's fingerprint
        r"(?:NVIDIA |Tesla |AMD )?(?:[ABHLTVK]\d{1,3}[A-Z]?|RTX \d{4}|GTX \d{4}|Instinct MI\d{2,3}[A-Z]?|"
        r"Radeon Graphics)(?:[ -](?:SXM\d?|PCIe|PCIE|DGXS|FHHL|PG\d{3}-\d{3}|\d+GB|NVL|Ti|HBM\d?e?))*",
    )
    + GPU_PATTERNS
)

#: ``thread 123 (NAME)`` (Kineto's thread labels) and ``autograd::engine::evaluate_function: NAME``:
#: public when NAME is.
#: (a substring every match holds, the pattern): the substring test spares the regex for most strings.
_WRAPPERS = (
    ("thread ", re.compile(r"thread \d+ \((.+)\)")),
    ("autograd::", re.compile(r"autograd::engine::evaluate_function: (.+)")),
)
_COMPOUND = re.compile(r"[A-Za-z]+(?:[-/][A-Za-z]+)*:?")
_ALPHA = re.compile(r"[A-Za-z]+")
#: Plain numbers, and strings without a letter or digit (punctuation cannot carry a name).
_NUMBER_OR_PUNCT = re.compile(r"[-+]?(?:\d[\d,_]*)?(?:\.\d+)?(?:[eE][-+]?\d+)?%?|[^\w]*")

#: Words of Poplar's text summaries and logs (labels, units) and common English words: free text made
#: only of these (and other public chunks) stays readable.
SUMMARY_WORDS = frozenset(
    [
        "B",
        "By",
        "Category",
        "Clock",
        "Code",
        "Constants",
        "Control",
        "Copy",
        "Count",
        "Cycles",
        "Data",
        "Descriptors",
        "Edge",
        "Exchange",
        "Excluding",
        "Execution",
        "Field",
        "Gaps",
        "Global",
        "Histogram",
        "Host",
        "IPU",
        "IPUs",
        "Including",
        "Instances",
        "Interleaved",
        "Internal",
        "KB",
        "Maximum",
        "Memory",
        "Non",
        "Number",
        "Overflowed",
        "Per",
        "Programs",
        "Range",
        "Region",
        "Replica",
        "Replicas",
        "Speed",
        "Target",
        "Tile",
        "Tiles",
        "Total",
        "Type",
        "Usage",
        "Variables",
        "VectorList",
        "Vertex",
        "after",
        "an",
        "anonymous",
        "approx",
        "asm",  # a "Vertex Code" row's tag: "poplar_rt::ShortMemcpy (asm)"
        "average",
        "by",
        "c++",  # a "Vertex Code" row's tag: "PiVertex (c++)"
        "called",
        "compute",
        "copy",
        "cycles",
        "exchange",
        "excluding",
        "executed",
        "global",
        "host",
        "idle",
        "including",
        "instance",
        "instances",
        "interleaved",
        "memory",
        "of",
        "out",
        "per",
        "pointers",
        "poplar",
        "rt",
        "s",
        "shared",
        "state",
        "structure",
        "sync",
        "terminate",
        "threads",
        "throwing",
        "tile",
        "tiles",
        "type",
        "usage",
        "vertex",
        "what",
        "Overlapped",
        "Not",
        "After",
        "Overlapping",
        "Program",
        "Sync",
        "IDs",
        "Message",
        "Buffers",
        "Estimated",
        "must",
        "enable",
        "Must",
        "instrumentCompute",
        "instrumentExternalExchange",
        "debug",
        "microseconds",
        "milliseconds",
        "seconds",
        "Out",
        "on",
        "bytes",
        "used",
        "but",
        "only",
        "have",
        "kB",
        "MB",
        "GB",
        "TB",
        "MHz",
        "GHz",
        "K",
        "M",
        "G",
        "Overall",
        "Breakdown",
        "Summary",
        "Variable",
        "Liveness",
        "Always",
        "Live",
        "Stack",
        "Instrumentation",
        "Results",
        "Storage",
        "Headers",
        "Packet",
        "Descriptor",
        "Table",
        "Vertices",
        "Edges",
        "Pointers",
        "Exchanges",
        "Size",
        "Sizes",
        "Min",
        "Max",
        "Mean",
        "Median",
        "Sum",
        "Average",
        "Peak",
        "Step",
        "Steps",
        "Run",
        "Runs",
        "Program",
        "Programs",
        "Compute",
        "Idle",
        "Supervisor",
        "Worker",
        "Thread",
        "Threads",
        "Cost",
        "Costs",
        "Estimate",
        "Estimates",
        "Largest",
        "Smallest",
        "Free",
        "Used",
        "Available",
        "Unused",
        "Always-Live",
        "Not-Always-Live",
        "the",
        "a",
        "an",
        "and",
        "or",
        "of",
        "in",
        "on",
        "at",
        "to",
        "from",
        "for",
        "with",
        "by",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "not",
        "no",
        "yes",
        "this",
        "that",
        "these",
        "those",
        "it",
        "its",
        "as",
        "if",
        "then",
        "else",
        "when",
        "while",
        "all",
        "any",
        "each",
        "every",
        "some",
        "more",
        "less",
        "most",
        "least",
        "than",
        "into",
        "over",
        "under",
        "per",
        "via",
        "about",
        "Evaluating",
        "whether",
        "run",
        "running",
        "child",
        "profiler",
        "Profiler",
        "Tracing",
        "tracing",
        "starting",
        "started",
        "will",
        "end",
        "ended",
        "ending",
        "Enabling",
        "enabling",
        "disabling",
        "Disabling",
        "GPU",
        "CPU",
        "warmup",
        "Warmup",
        "steps",
        "step",
        "active",
        "Active",
        "collection",
        "Collection",
        "completed",
        "Completed",
        "processed",
        "Processed",
        "events",
        "Events",
        "buffer",
        "buffers",
        "Buffer",
        "Buffers",
        "activities",
        "Activities",
        "trace",
        "Trace",
        "traces",
        "Traces",
        "record",
        "Recorded",
        "recording",
        "Recording",
        "iteration",
        "Iteration",
        "iterations",
        "in",
    ]
)

#: Public internet names that are not the user's infrastructure.
PUBLIC_HOSTS = frozenset(
    {
        "graphcore.ai",
        "docs.graphcore.ai",
        "github.com",
        "pypi.org",
        "python.org",
        "pytorch.org",
        "tensorflow.org",
        "huggingface.co",
        "localhost",
    }
)


#: popprof's own file formats: bundle manifest and redaction record keys and values.
POPPROF_FORMAT = frozenset(
    {
        "format",
        "format_version",
        "tool",
        "tool_version",
        "created",
        "profile_name",
        "source_format",
        "sources",
        "redacted",
        "tables",
        "file",
        "rows",
        "columns",
        "popprof-bundle",
        "popprof",
        "policy",
        "keep",
        "drop",
        "scrub",
        "identifiers",
        "allowlist",
        "popprof built-in",
        "source",
        "pseudonyms",
        "HMAC-SHA-256, keyed",
        "key_fingerprint",
        "redaction_key_fingerprint",
        "size_bytes",
        "sha256",
        "name",
        "paths",
        "users",
        "hosts",
        "emails",
        "ips",
        "urls",
        "secrets",
        "env",
        "policy file",
        "command line",
        "[tool.popprof.redact]",
        "source_files",
        MANIFEST,
        "metadata",
        "key",
        "value",
        # pandas / pyarrow schema metadata written into every Parquet file
        "pandas",
        "pyarrow",
        "pandas_version",
        "index_columns",
        "column_indexes",
        "field_name",
        "pandas_type",
        "numpy_type",
        "creator",
        "library",
        "version",
        "attributes",
        "num_categories",
        "ordered",
        "kind",
        "start",
        "stop",
        "step",
        "range",
        "encoding",
        "UTF-8",
        "object",
        "str",
        "string",
        "large_string",
        "categorical",
        "unicode",
        "bytes",
        "datetime",
        "datetimetz",
        "datetime64[ns]",
        "datetime64[us]",
        "timedelta",
        "timedelta64[ns]",
        "date",
        "time",
        "empty",
        "mixed",
        "mixed-integer",
        "decimal",
        "category",
        "Int64",
        "Int32",
        "Float64",
        "boolean",
        "ARROW:schema",
    }
)


def _popprof_names() -> frozenset[str]:
    names: set[str] = set(TABLES) | POPPROF_FORMAT | {f"{table}.parquet" for table in TABLES}
    for spec in TABLES.values():
        names.update(spec.column_names)
    try:
        from ..metrics import METRICS

        names.update(METRICS)
    except ImportError:  # pragma: no cover
        pass
    return frozenset(names)


def _sensitive_key_names() -> frozenset[str]:
    """The generic key names whose VALUES are sensitive (``hostname``, ``user``...): the names are public."""
    return frozenset(SENSITIVE_KEYS) | {
        "api_token",
        "api_key",
        "access_key",
        "secret_key",
        "auth_token",
        "user_name",
        "host_name",
        "data_dir",
        "output_dir",
        "log_dir",
        "checkpoint_dir",
        "dataset_path",
        "hostname",
        "launch",
        "app",
        "engine_options",
        "framework",
        "frameworks",
        "env",
        "environment",
        "command",
        "cmd",
        "argv",
        "args",
        "config",
        "note",
        "repo",
        "url",
    }


BASE_WORDS: frozenset[str] = (
    PROGRAM_TYPES
    | MEMORY_CATEGORIES
    | frozenset(STEP_CATEGORIES)
    | CHANNELS
    | LAYERS
    | TARGET_VALUES
    | ENGINE_NAMES
    | CHROME_VALUES
    | SDK_EVENTS
    | DTYPES
    | KINETO_CATEGORIES
    | KINETO_KEYS
    | RECORD_FUNCTIONS
    | _popprof_names()
    | _sensitive_key_names()
)


class Allowlist:
    """Decides whether a string is public vocabulary (kept as it is)."""

    def __init__(
        self,
        extra_words: Iterable[str] = (),
        extra_patterns: Iterable[re.Pattern[str]] = (),
        extra_namespaces: Iterable[str] = (),
    ) -> None:
        """``extra_namespaces``: identifiers (namespaces, classes) a C++ name may hold besides the
        vocabulary's; every other identifier of the name must still be public."""
        self.words = set(BASE_WORDS) | set(extra_words)
        self.patterns = list(PUBLIC_PATTERNS) + list(extra_patterns)
        self.grammar = NameGrammar(extra_identifiers=extra_namespaces)
        self.text_words = SUMMARY_WORDS | MESSAGE_WORDS | label_words()
        self._combined = re.compile("|".join(f"(?:{p.pattern})" for p in self.patterns))
        self._cache: dict[str, bool] = {}

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, str):
            return False
        hit = self._cache.get(value)
        if hit is None:
            hit = self._decide(value)
            if len(self._cache) < 2_000_000:
                self._cache[value] = hit
        return hit

    def _decide(self, value: str) -> bool:
        if value in self.words or self._combined.fullmatch(value) is not None or summary_label(value):
            return True
        if _NUMBER_OR_PUNCT.fullmatch(value):
            return True
        if (
            value in self.text_words
            or _COMPOUND.fullmatch(value)
            and all(w in self.text_words or w in self.words for w in _ALPHA.findall(value))
        ):
            return True
        if value[-1:] in ":.," and len(value) > 1 and value[:-1] in self:
            return True  # a public word closing a label or a sentence ("main, main." of "Programs executed")
        if len(value) <= 10_000 and has_space(value) and all(chunk in self for chunk in chunk_strings(value)):
            return True  # free text is public when every chunk of it is
        for marker, wrapper in _WRAPPERS:
            m = wrapper.fullmatch(value) if marker in value else None
            if m is not None:
                return m.group(1) in self
        return self.grammar.public(value)
