"""Public code names by vocabulary and grammar: a name is public only when it is one AS A WHOLE.

The vocabulary files (:mod:`.vocabulary`) list the public names of each ecosystem; the grammars
here say how those names combine, and every part of a name must be accounted for:

- a Poplar / PopLibs vertex is a listed class name (``popops::Fill``, ``poplar_rt::ShortMemcpy``; the
  bare ``Fill`` of older output) with template arguments that each parse as a C++ type, a number,
  ``true``/``false``, a listed enum member (``popops::expr::BinaryOpType::ADD``) or another vertex;
- an ATen operator, an autograd node, a CUDA/HIP API call and a Poplar option are listed exactly;
- an NCCL kernel is ``ncclKernel_<coll>_<algo>_<proto>_<redop>_<type>`` (to 2.18) or
  ``ncclDevKernel_<coll>[_<redop>_<type>]_<algo>_<proto>`` (2.19 on), each part from NCCL's own
  lists, with one of the argument lists NCCL prints;
- a generated cuBLAS / cuDNN / CUTLASS name (``ampere_sgemm_128x64_nn``) has an architecture head and
  every ``_`` part listed or of a numeric shape;
- a C++ kernel signature (``void at::native::reduce_kernel<512, 1, ...>(...)``) is public only when
  every identifier in it is a listed kernel identifier, C++ word or public namespace, and every
  number is a plain literal: ``at::native::<anything>`` is not public by its namespace.

A known prefix never makes a name public: ``aten::QzvSecretModelName``, ``popops::QzvCustom<float>``,
``ncclKernel_<anything>``, ``cudaX()``, ``main::X`` and ``void (anonymous namespace)::user_kernel<float>()``
are all replaced.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from . import vocabulary
from .vocabulary.builtin import CPP_TYPES, CPP_WORDS, POPLAR_MESSAGES

_KERNEL_NAMES = vocabulary.data("gpu_kernel_names.json")
#: Namespaces of public libraries that kernel signatures are qualified with (each still followed by a
#: listed identifier: the namespace alone proves nothing).
CPP_NAMESPACES = frozenset(_KERNEL_NAMES["cpp_namespaces"])
#: Exception classes Poplar and PopLibs throw (printed in ``terminate called after throwing an instance
#: of '...'``), and the C++ standard ones.
EXCEPTIONS = frozenset(_KERNEL_NAMES["exceptions"])
MESSAGE_WORDS = frozenset(w for m in POPLAR_MESSAGES for w in re.findall(r"[A-Za-z_]+", m)) - {
    "n",
    "path",
    "name",
}
#: Generated-kernel name parts that the public traces here do not show (names seen in other public
#: traces), and the architecture heads such names open with.
_KERNEL_PARTS_SEEN = frozenset(_KERNEL_NAMES["kernel_parts"])
_ARCH_HEAD = re.compile("|".join(re.escape(h) for h in _KERNEL_NAMES["architecture_heads"]) + r"|sm\d{2,3}")
_PART_SHAPE = re.compile(
    r"\d+(?:x\d+)*|(?:stages?|align[ac]?|tilesize|warpsize|tensor|sliced|ldg|g|v|nstages|stride)\d+(?:x\d+)*"
    r"|[shdcz]?(?:1688|16816|884|8816)(?:gemm|fprop|dgrad|wgrad)"
)
_GENERATED = re.compile(r"[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+")
_NUMBER_LITERAL = re.compile(
    r"(?:\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|0x[0-9a-fA-F]{1,16})(?:u|ul|ull|l|ll|f|U|UL|ULL|L|LL|F)?"
)
# ASCII only: with Unicode's \w a letter such as 'ń' passed the character check yet matched no token (not an
# identifier's start, not [^\w]), so 'ńlambda' was kept as the public 'lambda' and the leak scan failed
_CPP_CHARS = re.compile(r"[\w:<>()\[\],*& #{}~.+\-!]+", re.ASCII)
_SIGNATURE_TOKEN = re.compile(
    r"(?P<num>\d[\w.]*)|(?P<anon>\(anonymous namespace\))|(?P<ident>[A-Za-z_]\w*)|(?P<other>[^\w])", re.ASCII
)
_VERTEX = re.compile(r"(?P<name>[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)\s*(?:<(?P<args>.*)>)?")
_NUMBERED_NODE = re.compile(r"([A-Za-z]\w*Backward)[1-9]")
_INT = re.compile(r"-?\d+(?:u|ul|ull|l|ll|U|UL)?")
_RUNTIME_SUFFIX = re.compile(r"(.+?)(?:_v\d+|_ptsz|_ptds|_spt)+")
_TEMPLATE_TYPES = frozenset(
    {"unsigned int", "unsigned short", "unsigned char", "signed char", "long long", "unsigned long",
     "unsigned long long", "long int", "short int"}
)  # fmt: skip
_LEGACY_NCCL_PRE_2_8 = re.compile(
    r"nccl(?:AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|SendRecv|AllToAll|Send|Recv)"
    r"(?:Ring|Tree|CollNet|NVLS|LL128|LL|Simple)*Kernel(?:_[a-z0-9]+){0,3}"
)


@functools.cache
def _labels() -> tuple[frozenset[str], re.Pattern[str]]:
    """The summary labels: exact ones, and a pattern for those with a number (``<n>``) in them."""
    labels = vocabulary.names("text_summary_labels.txt")
    exact = frozenset(label for label in labels if "<n>" not in label)
    templated = [
        re.escape(label).replace(re.escape("<n>"), r"\d[\d,]*(?:\.\d+)?") for label in labels - exact
    ]
    return exact, re.compile("|".join(f"(?:{t})" for t in templated) or r"(?!)")


@functools.cache
def label_words() -> frozenset[str]:
    """Every word of the summary's labels (``vertices``, ``Storage``): public wherever it stands."""
    return frozenset(
        w for label in vocabulary.names("text_summary_labels.txt") for w in re.findall(r"[A-Za-z]+", label)
    )


def summary_label(text: str) -> bool:
    """A label of Poplar's text summary (``Total cycles``, ``Tile # 289 memory usage``)."""
    exact, templated = _labels()
    return text in exact or templated.fullmatch(text) is not None


def _split_args(text: str) -> list[str] | None:
    """Top-level comma-separated template arguments; None when brackets do not balance."""
    out: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
            if depth < 0:
                return None
        elif ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    if depth:
        return None
    out.append(text[start:].strip())
    return out


def _alternation(words: Iterable[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True))


class NameGrammar:
    """Decides whether a code name is public vocabulary, by the files and grammars above."""

    def __init__(self, extra_identifiers: Iterable[str] = ()) -> None:
        v = vocabulary.names
        self.vertices = v("poplibs_vertices.txt") | v("poplar_runtime_vertices.txt")
        self.bare_vertices = frozenset(name.rsplit("::", 1)[-1] for name in v("poplibs_vertices.txt"))
        self.template_values = v("poplibs_template_values.txt")
        self._value_tails = frozenset(
            "::".join(parts[i:])
            for value in self.template_values
            for parts in [value.split("::")]
            for i in range(1, len(parts) - 1)
        )
        self.exact = (
            v("pytorch_operators.txt")
            | v("pytorch_autograd_nodes.txt")
            | v("cuda_api.txt")
            | v("hip_api.txt")
            | v("poplar_options.txt")
            | EXCEPTIONS
            | self.template_values
            | frozenset(vocabulary.data("pytorch_profiler.json")["legacy_operators"])
        )
        self.cuda = v("cuda_api.txt") | v("hip_api.txt")
        self.kernels = v("gpu_kernel_identifiers.txt")  # a bare kernel name (``gemmSN_TN_kernel``)
        namespaces = {part for name in self.vertices | self.template_values for part in name.split("::")[:-1]}
        self.identifiers = (
            v("gpu_kernel_identifiers.txt")
            | CPP_WORDS
            | CPP_NAMESPACES
            | frozenset(namespaces)
            | self.cuda
            | frozenset(extra_identifiers)
        )
        self.kernel_parts = v("gpu_kernel_parts.txt") | _KERNEL_PARTS_SEEN
        self._nccl = self._nccl_grammar(vocabulary.data("nccl_kernels.json"))

    @staticmethod
    def _nccl_grammar(spec: dict) -> re.Pattern[str]:
        cur, old = spec["current"], spec["legacy"]
        args = r"(?:\((?:" + _alternation(spec["argument_lists"]) + r"|ncclDevKernelArgsStorage<\d+ul>)\))?"
        legacy = (
            rf"ncclKernel_(?:{_alternation(old['collectives'])})_(?:{_alternation(old['algorithms'])})_"
            rf"(?:{_alternation(old['protocols'])})_(?:{_alternation(old['reductions'])})_"
            rf"(?:{_alternation(old['types'])})"
        )
        current = (
            rf"ncclDevKernel_(?:Generic(?:_\d+)?|(?:{_alternation(cur['collectives'])})"
            rf"(?:_(?:{_alternation(cur['reductions'])})_(?:{_alternation(cur['types'])}))?"
            rf"(?:_(?:{_alternation(cur['algorithms'])})_(?:{_alternation(cur['protocols'])}))?)"
        )
        return re.compile(rf"(?:{legacy}|{current}){args}")

    # -- the grammars ----------------------------------------------------------------------------------
    def public(self, value: str) -> bool:
        """True when ``value`` is a public code name as a whole."""
        if len(value) > 20_000:
            return False
        if value in self.exact or value in self.vertices or value in self.kernels:
            return True
        m = _NUMBERED_NODE.fullmatch(value)
        if m is not None and (m.group(1) in self.exact or m.group(1) + "0" in self.exact):
            return True  # an overload's node of a listed one (PyTorch 1.9's ``ReluBackward1``)
        if "_" in value:  # the suffix regex backtracks: only where a suffix can be
            m = _RUNTIME_SUFFIX.fullmatch(value)
            if m is not None and m.group(1) in self.cuda:
                return True
        if value.startswith(("nccl", "rccl")):
            return (
                self._nccl.fullmatch(value) is not None or _LEGACY_NCCL_PRE_2_8.fullmatch(value) is not None
            )
        if self.vertex(value) or self.generated_kernel(value):
            return True
        return self.signature(value)

    def vertex(self, value: str, depth: int = 0) -> bool:
        """A Poplar / PopLibs vertex name with every template argument accounted for."""
        head = value.split("<", 1)[0].strip()
        if head not in self.vertices and head not in self.bare_vertices or depth > 8:
            return False  # the class name decides first (a set look-up; most names end here)
        m = _VERTEX.fullmatch(value.strip())
        if m is None:
            return False
        name = m["name"]
        if name not in self.vertices and name not in self.bare_vertices:
            return False
        if m["args"] is None:
            return True
        args = _split_args(m["args"])
        return args is not None and all(self._template_arg(a, depth) for a in args)

    def _template_arg(self, arg: str, depth: int) -> bool:
        if arg in CPP_TYPES or arg in _TEMPLATE_TYPES or arg in ("true", "false") or _INT.fullmatch(arg):
            return True
        if arg in self.template_values or arg in self._value_tails:
            return True
        return "::" in arg and self.vertex(arg, depth + 1) or arg in self.vertices

    def generated_kernel(self, value: str) -> bool:
        """A generated cuBLAS / cuDNN / CUTLASS kernel name, every ``_`` part accounted for."""
        if _ARCH_HEAD.fullmatch(value.split("_", 1)[0]) is None or _GENERATED.fullmatch(value) is None:
            return False
        parts = value.split("_")
        return all(p in self.kernel_parts or _PART_SHAPE.fullmatch(p) for p in parts[1:])

    def signature(self, value: str) -> bool:
        """A C++ symbol (a kernel signature) whose every identifier and number is public."""
        if not ("::" in value or "<" in value or "(" in value):
            return False
        if _CPP_CHARS.fullmatch(value) is None or "  " in value:
            return False
        saw_name = False
        for m in _SIGNATURE_TOKEN.finditer(value):
            kind = m.lastgroup
            text = m.group(0)
            if kind == "num":
                if _NUMBER_LITERAL.fullmatch(text) is None:
                    return False
            elif kind == "ident":
                if text not in self.identifiers and not self.generated_kernel(text):
                    return False
                saw_name = True
        return saw_name
