"""Long names (C++ kernel signatures, program paths) shortened for text and Markdown tables.

A GPU trace's kernel names are often thousands of characters of template arguments and
parameter lists; a table row shows the name's head with those lists folded to ``...``, but keeps
what tells kernels apart: the template arguments when they fit, else the one that names the
kernel's work (the functor, the GEMM configuration: the first argument that is not a number or a
plain type), shortened in turn. Names of one table that still read the same are numbered
(:func:`short_names`); a table that shows some of many names widens a shown one that would read like one it
leaves out (:func:`names_apart`, diff's changed events). JSON outputs keep the full name: this is for
tables read by people only (``docs/figures.md``, "How text prints"). A sentence names a kernel by its
callable's name alone (:func:`kernel_words`), an operator call by its input shapes (:func:`shape_words`).
One module for rules (layer 5) and report (layer 7) alike: it imports nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

#: Widest name a text or Markdown table shows before shortening it.
NAME_WIDTH = 90

_OPEN = {"<": ">", "(": ")", "[": "]"}
_CLOSE = {v: k for k, v in _OPEN.items()}
#: Shortest room worth giving a template argument: with less, its list is folded to ``<...>``.
_MIN_ARGUMENT = 12
_ANONYMOUS = "(anonymous namespace)::"
#: Template arguments that tell nothing about the kernel's work: numbers, flags, casts of numbers and plain
#: types (``float``, ``unsigned int``, ``c10::Half``, ``float const*``).
_PLAIN = re.compile(
    r"(?:-?\d+[uUlL]*|true|false|\([\w:]+\)-?\d+"
    r"|(?:(?:unsigned|signed|const|long|short)\s+)*"
    r"(?:(?:c10|at)::(?:Half|BFloat16)|__half2?|__nv_bfloat16|bool|char|short|int|long|float|double|half|size_t"
    r"|u?int\d+_t|float\d|double\d|int\d|half\d|unsigned|signed)"
    r"(?:\s*const)?\s*[*&]*)"
)


def _groups(name: str) -> list[tuple[int, int]] | None:
    """Spans ``(open, close)`` of the outermost bracketed lists of ``name``; ``None`` when they do not pair up."""
    spans: list[tuple[int, int]] = []
    stack: list[str] = []
    start = 0
    for i, char in enumerate(name):
        if char in _OPEN:
            if not stack:
                start = i
            stack.append(char)
        elif char in _CLOSE:
            if not stack or stack[-1] != _CLOSE[char]:
                return None
            stack.pop()
            if not stack:
                spans.append((start, i))
    return None if stack else spans


def fold_brackets(name: str) -> str | None:
    """``name`` with the contents of each outermost ``<...>``, ``(...)`` and ``[...]`` folded to ``...``.

    ``None`` when the brackets do not pair up (an ``operator<`` or a cut name): then nothing is folded.
    """
    spans = _groups(name)
    if spans is None:
        return None
    return _rebuild(name, spans, {})


def _rebuild(name: str, spans: list[tuple[int, int]], inner: dict[int, str]) -> str:
    """``name`` with each bracketed list folded to ``...``, or replaced by ``inner[k]`` for the k-th list."""
    out, last = [], 0
    for k, (a, b) in enumerate(spans):
        out += [name[last : a + 1], inner.get(k, "..."), name[b]]
        last = b + 1
    out.append(name[last:])
    return "".join(out)


def _arguments(inner: str) -> list[str]:
    """The comma-separated arguments of a template list, split outside nested brackets."""
    args, depth, start = [], 0, 0
    for i, char in enumerate(inner):
        if char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth -= 1
        elif char == "," and depth == 0:
            args.append(inner[start:i].strip())
            start = i + 1
    args.append(inner[start:].strip())
    return args


def _unscoped(name: str) -> str:
    """``name`` without the namespaces before its own name: ``at::native::CUDAFunctor_add<float>`` ->
    ``CUDAFunctor_add<float>``."""
    name = name.replace(_ANONYMOUS, "")
    head = re.split(r"[<(\[]", name, maxsplit=1)[0]
    cut = head.rfind("::")
    return name[cut + 2 :] if cut >= 0 else name


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 3, 1)] + "..."


def short_name(name: object, width: int = NAME_WIDTH) -> str:
    """``name`` as a table shows it: as is when it fits in ``width``; else with its parameter list folded
    and its first template list kept whole, or only the argument that tells the kernel apart
    (``void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>(...)``,
    ``void at::native::vectorized_elementwise_kernel<..., CUDAFunctor_add<float>, ...>(...)``), or every
    list folded (``void at::native::kernel<...>(...)``); cut to ``width`` with ``...`` if still too long."""
    text = str(name)
    if len(text) <= width:
        return text
    spans = _groups(text)
    if spans is None:
        return _cut(text, width)
    folded = _rebuild(text, spans, {})
    first = next((k for k, (a, _) in enumerate(spans) if text[a] == "<"), None)
    if first is None:
        return _cut(folded, width)
    a, b = spans[first]
    inner = text[a + 1 : b]
    args = _arguments(inner)
    candidates = [
        inner,
        ", ".join(arg if _PLAIN.fullmatch(arg) else fold_brackets(arg) or arg for arg in args),
    ]
    room = width - (len(folded) - 3)  # what the template list may take in place of its "..."
    for candidate in candidates:
        if len(candidate) <= room:
            return _rebuild(text, spans, {first: candidate})
    telling = next((i for i, arg in enumerate(args) if not _PLAIN.fullmatch(arg)), None)
    if telling is None:  # numbers and plain types only: as many as fit
        for n in range(len(args) - 1, 0, -1):
            candidate = ", ".join(args[:n]) + ", ..."
            if len(candidate) <= room:
                return _rebuild(text, spans, {first: candidate})
        return _cut(folded, width)
    argument = _unscoped(args[telling])
    lead = "".join(f"{arg}, " for arg in args[:telling])
    after = ", ..." if telling < len(args) - 1 else ""
    if len(lead) + len(argument) + len(after) <= room:  # the plain arguments before it too
        return _rebuild(text, spans, {first: lead + argument + after})
    for before in dict.fromkeys([lead, "..., " if telling > 0 else ""]):  # the plain ones, else "..."
        space = room - len(before) - len(after)
        if space >= _MIN_ARGUMENT:
            return _rebuild(text, spans, {first: before + short_name(argument, space) + after})
    return _cut(folded, width)


def short_names(names: Iterable[object], width: int = NAME_WIDTH) -> list[str]:
    """The names of one table shortened (:func:`short_name`), different names that still read the same
    numbered in the order they come: ``void cutlass::Kernel<...>(...) #1``, ``... #2``."""
    return _numbered(names, short_name, width)


def _numbered(names: Iterable[object], shorten: Callable[[str, int], str], width: int) -> list[str]:
    """``shorten(name, width)`` of each name; different names that then read the same numbered in the order
    they come, shortened again to leave the number room within ``width``."""
    names = [str(n) for n in names]
    shorts = [shorten(n, width) for n in names]
    distinct: dict[str, list[str]] = {}
    for name, short in zip(names, shorts, strict=True):
        seen = distinct.setdefault(short, [])
        if name not in seen:
            seen.append(name)
    out = []
    for name, short in zip(names, shorts, strict=True):
        same = distinct[short]
        if len(same) == 1:
            out.append(short)
            continue
        suffix = f" #{same.index(name) + 1}"
        out.append(shorten(name, width - len(suffix)) + suffix)
    return out


def names_apart(shown: Iterable[object], every: Iterable[object], width: int) -> list[str]:
    """The names of the rows a table shows, shortened to ``width`` so that none reads like another of ``every``.

    Only some rows are shown, but the reader knows the section's other names (the profile has them): a kernel
    shortened to ``void at::native::vectorized_elementwise_kernel<...>(...)`` would read as any of the three such
    kernels of HTA's ``trace_compare`` pair. A shown name that reads like another of ``every`` is shown as wide
    as a summary's tables show names (``NAME_WIDTH``), where the argument that tells them apart fits
    (``...<4, CUDAFunctor_add<int>, ...>(...)``), numbered among them when even that reads the same. Only the
    names that begin as a shown one does (up to its first bracket, within ``width``) can read like it: the others
    are never shortened here.
    """
    names = [str(n) for n in shown]
    shorts = short_names(names, width)
    heads = {_head(n, width) for n in names if len(n) > width}
    if not heads:
        return shorts
    alike: dict[str, list[str]] = {}
    for name in sorted({str(n) for n in every} | set(names)):
        if len(name) > width and _head(name, width) in heads:
            alike.setdefault(short_name(name, width), []).append(name)
    wide: dict[str, list[str]] = {}
    out = []
    for name, short in zip(names, shorts, strict=True):
        group = alike.get(short_name(name, width), [name]) if len(name) > width else [name]
        if len(group) == 1:
            out.append(short)
            continue
        key = short_name(name, width)
        if key not in wide:  # once per group: its names as wide as a summary shows them, numbered if alike
            wide[key] = short_names(group, NAME_WIDTH)
        out.append(wide[key][group.index(name)])
    return out


def _head(name: str, width: int) -> str:
    """What shortening to ``width`` keeps of ``name`` whatever its brackets hold: the text before the first one."""
    cut = min((i for i in (name.find("<"), name.find("("), name.find("[")) if i >= 0), default=len(name))
    return name[: min(cut, width - 3)]


#: How PyTorch's profiler names the autograd engine running a backward node: the node's name follows.
AUTOGRAD_PREFIX = "autograd::engine::evaluate_function: "


def operator_name(name: object, width: int = NAME_WIDTH) -> str:
    """A framework operator's name as a table shows it: :func:`short_name`, but a backward node run by the
    autograd engine by the node alone (``autograd::engine::evaluate_function: torch::autograd::AccumulateGrad``
    -> ``AccumulateGrad``), its namespaces left out: the prefix every backward row shares would fill the
    column and leave ``autograd::engine::eval...`` of each."""
    text = str(name)
    if text.startswith(AUTOGRAD_PREFIX) and len(text) > width:
        text = _unscoped(text[len(AUTOGRAD_PREFIX) :])
    return short_name(text, width)


def operator_names(names: Iterable[object], width: int = NAME_WIDTH) -> list[str]:
    """:func:`operator_name` of each name, different names that read the same numbered (:func:`short_names`)."""
    return _numbered(names, operator_name, width)


def _matching_open(text: str, close: int, opening: str, closing: str) -> int:
    """Index of the ``opening`` bracket that the ``closing`` one at ``close`` closes; -1 when none does."""
    depth = 0
    for i in range(close, -1, -1):
        if text[i] == closing:
            depth += 1
        elif text[i] == opening:
            depth -= 1
            if depth == 0:
                return i
    return -1


def kernel_word(name: object, width: int = 48) -> str:
    """The callable's name of a demangled C++ signature, for a sentence: without its return type, template
    arguments and parameters (``std::enable_if<(8>0), void>::type vllm::rms_norm_kernel<c10::Half, 8>(...)`` ->
    ``vllm::rms_norm_kernel``; ``(anonymous namespace)::`` left out); a name without C++ decoration
    (``Memcpy DtoD``) as it is; wider than ``width``, its outer namespaces go first, then its end (``...``)."""
    text = str(name).replace(_ANONYMOUS, "").strip()
    if text.endswith(")"):  # the parameter list
        start = _matching_open(text, len(text) - 1, "(", ")")
        if start > 0:
            text = text[:start].rstrip()
    if text.endswith(">"):  # the callable's own template arguments
        start = _matching_open(text, len(text) - 1, "<", ">")
        if start > 0:
            text = text[:start].rstrip()
    if "::" in text or "<" in text:  # the last word outside brackets: the return type goes
        depth, cut = 0, -1
        for i, char in enumerate(text):
            if char in "<([":
                depth += 1
            elif char in ">)]":
                depth = max(depth - 1, 0)
            elif char == " " and depth == 0:
                cut = i
        text = text[cut + 1 :] or text
    while len(text) > width and "::" in text:
        text = text.split("::", 1)[1]
    return _cut(text or str(name), width)


def kernel_words(names: Iterable[object], width: int = 48) -> list[str]:
    """:func:`kernel_word` of each name, different names that read the same numbered in the order they come
    (``cutlass::Kernel2 #1``, ``cutlass::Kernel2 #2``), as :func:`short_names` numbers a table's."""
    return _numbered(names, kernel_word, width)


def _tensor_words(shape: object) -> str:
    """One input's shape: dimensions joined by ``x``; a list of tensors (``aten::cat``'s) in brackets; ``""``
    for a scalar or an input without a shape."""
    if not isinstance(shape, list | tuple) or not shape:
        return ""
    if all(isinstance(d, int | float) and not isinstance(d, bool) for d in shape):
        return "x".join(str(int(d)) for d in shape)
    inner = [w for w in (_tensor_words(s) for s in shape) if w]
    return f"[{', '.join(inner)}]" if inner else ""


def shape_words(shapes: object, width: int = 40) -> str:
    """An operator call's recorded input shapes for a sentence or a table row: each tensor's dimensions joined
    by ``x``, tensors by ``, `` (``[[16, 512], [512, 512], [], []]`` -> ``16x512, 512x512``; a tensor list in
    brackets); scalars and inputs without a shape (``[]``) left out; cut to ``width`` with ``...``. Empty when
    nothing was recorded."""
    if not isinstance(shapes, list | tuple):
        return ""
    tensors = [w for w in (_tensor_words(shape) for shape in shapes) if w]
    return _cut(", ".join(tensors), width) if tensors else ""
