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

from ..model.schema import STEP_CATEGORIES, TABLES
from ..trace.host_calls import SAMPLE_CALLS
from .gpu_vocabulary import GPU_PATTERNS, KINETO_CATEGORIES, KINETO_KEYS, RECORD_FUNCTIONS
from .keynames import SENSITIVE_KEYS
from .names import MESSAGE_WORDS, NameGrammar, label_words, summary_label
from .tokens import chunk_strings, has_space
from .vocabulary.builtin import (
    CHANNELS,
    CHROME_VALUES,
    CUPTI_SASS_COUNTERS,
    DEVICE_METADATA_KEYS,
    DTYPES,
    ENGINE_NAMES,
    LAYERS,
    MEMORY_CATEGORIES,
    POPPROF_FORMAT,
    PROGRAM_TYPES,
    PUBLIC_KEY_NAMES,
    READ_PROBLEM_KEYS,
    SDK_EVENTS,
    SUMMARY_WORDS,
    TARGET_VALUES,
    TPU_CHIP_KINDS,
    XLA_HLO_CATEGORIES,
    XPLANE_KEYS,
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
    return frozenset(SENSITIVE_KEYS) | PUBLIC_KEY_NAMES


BASE_WORDS: frozenset[str] = (
    PROGRAM_TYPES
    | MEMORY_CATEGORIES
    | frozenset(STEP_CATEGORIES)
    | frozenset(SAMPLE_CALLS)
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
    | XPLANE_KEYS
    | DEVICE_METADATA_KEYS
    | READ_PROBLEM_KEYS
    | XLA_HLO_CATEGORIES
    | TPU_CHIP_KINDS
    | CUPTI_SASS_COUNTERS
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
