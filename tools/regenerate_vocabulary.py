"""Regenerate the redaction vocabulary files from public sources (run by hand, never at run time).

Usage::

    python tools/regenerate_vocabulary.py SOURCE CHECKOUT [--ref REF] [--old-ref REF]

``SOURCE`` is one of :data:`SOURCES`; ``CHECKOUT`` a clone of that source's repository (a
working tree, or a bare clone with ``--ref``). Each run rewrites the files of that source in
``popprof/redaction/vocabulary/`` (this script sits outside the package, so the wheel does not ship it),
each opening with a header that names the repository, the paths read and the
commit. The ``summary`` source takes one or more directories of Poplar text output instead.

The files are data (names and facts), never code of those projects: the parsing here is
popprof's own and keeps only names.

Two JSON files are curated by hand, not regenerated, because no single source file lists their
names (each carries its sources under ``provenance``; edit them and keep the lists sorted):

- ``pytorch_profiler.json``: trace-level values and keys of the PyTorch profiler across releases
  (device and backend words, dtypes, the capitalised categories of 2021: ``Operator``, ``async``,
  ``[memory]``), TorchScript ``prim::`` operators (``torch/csrc/jit/ir/ir.h``), torch.distributed's
  collectives (``distributed_c10d.py``), the built-in optimizers (``torch/optim``), record functions
  PyTorch names by a fixed text (``torch/utils/data/dataloader.py``), and ATen operators of PyTorch
  1.8/1.9 that ``native_functions.yaml`` no longer lists (read from the 2021 trace in
  ``fixtures/real/traces``: ``aten::cudnn_convolution_backward_weight``).
- ``gpu_kernel_names.json``: namespaces of public libraries in kernel signatures, generated-kernel
  parts and architecture heads seen in public traces other than those here, and exception classes of
  Poplar/PopLibs and the C++ standard library.

Both were first written from the lists popprof held in code before (2026-12-02).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

#: The vocabulary files' folder, written by each run.
HERE = Path(__file__).resolve().parents[1] / "popprof" / "redaction" / "vocabulary"


class Checkout:
    """Reads files of one repository: from the working tree, or at ``ref`` through git."""

    def __init__(self, root: str | Path, ref: str | None = None) -> None:
        self.root = Path(root)
        self.ref = ref

    def commit(self, ref: str | None = None) -> str:
        """The commit read (the full hash), or ``unknown`` when the checkout is no git repository."""
        try:
            out = subprocess.run(
                ["git", "-C", str(self.root), "rev-parse", (ref or self.ref or "HEAD") + "^{commit}"],
                capture_output=True,
                text=True,
                check=True,
            )
        except (OSError, subprocess.CalledProcessError):
            return self._wheel_commit()
        return out.stdout.strip()

    def _wheel_commit(self) -> str:
        """An unpacked torch wheel records the commit it was built from in ``torch/version.py``."""
        version = self.root / "torch" / "version.py"
        if version.is_file():
            m = re.search(r"git_version = '([0-9a-f]{40})'", version.read_text("utf-8"))
            if m:
                return m.group(1) + " (from an unpacked torch wheel: torchgen/packaged/)"
        return "unknown"

    def read(self, path: str, ref: str | None = None) -> str:
        """The text of ``path`` (at ``ref``, else this checkout's ref, else the working tree)."""
        ref = ref or self.ref
        if ref is None:
            return (self.root / path).read_text("utf-8", "replace")
        out = subprocess.run(
            ["git", "-C", str(self.root), "show", f"{ref}:{path}"], capture_output=True, check=True
        )
        return out.stdout.decode("utf-8", "replace")

    def files(self, pattern: str, ref: str | None = None) -> list[str]:
        """Paths (relative, sorted) matching the regular expression ``pattern``."""
        ref = ref or self.ref
        if ref is None:
            names = [p.relative_to(self.root).as_posix() for p in self.root.rglob("*") if p.is_file()]
        else:
            out = subprocess.run(
                ["git", "-C", str(self.root), "ls-tree", "-r", "--name-only", ref],
                capture_output=True,
                text=True,
                check=True,
            )
            names = out.stdout.splitlines()
        rx = re.compile(pattern)
        return sorted(n for n in names if rx.fullmatch(n))


def header(what: str, repository: str, paths: Iterable[str], commit: str, source: str) -> str:
    """The comment header every text vocabulary file opens with."""
    lines = [
        f"# popprof redaction vocabulary: {what}",
        f"# repository: {repository}",
        *(f"# path: {p}" for p in paths),
        f"# commit: {commit}",
        f"# regenerate: python tools/regenerate_vocabulary.py {source} CHECKOUT [--ref REF ...]",
        "# one name a line; lines starting with # are comments",
    ]
    return "\n".join(lines) + "\n"


def write_names(name: str, head: str, names: Iterable[str]) -> int:
    """Write ``names`` (sorted, unique) under ``head``; returns how many."""
    unique = sorted(set(names))
    (HERE / name).write_text(head + "".join(n + "\n" for n in unique), "utf-8")
    return len(unique)


def write_json(name: str, provenance: dict, data: dict) -> None:
    """Write a JSON vocabulary file with its provenance first."""
    doc = {"provenance": provenance, **data}
    (HERE / name).write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n", "utf-8")


# -- C++ scanning (PopLibs) ------------------------------------------------------------------------

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_CXX_TOKEN = re.compile(
    r"\bnamespace\s+([A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)\s*\{"
    r"|\b(?:class|struct)\s+(?:alignas\([^)]*\)\s+)?([A-Z]\w*)\s*(?:final\s*)?(?=[:{])"
    r"|\benum\s+(?:class\s+|struct\s+)?([A-Za-z_]\w*)\s*(?::\s*[\w: ]+)?\{([^{}]*)\}"
    r"|[{}]"
)


def cxx_declarations(text: str) -> tuple[set[str], set[str]]:
    """Qualified class/struct names declared at namespace scope, and qualified enum members."""
    text = _STRING.sub('""', _COMMENT.sub(" ", text))
    text = re.sub(r"^\s*#.*$", "", text, flags=re.M)  # preprocessor lines (macros hold stray braces)
    stack: list[str | None] = []
    classes: set[str] = set()
    enums: set[str] = set()
    for m in _CXX_TOKEN.finditer(text):
        if m.group(1):
            stack.append(m.group(1))
            continue
        scope = [s for s in stack if s is not None]
        at_namespace = all(s is not None for s in stack)
        if m.group(2):
            if at_namespace and scope:
                classes.add("::".join(scope + [m.group(2)]))
            continue
        if m.group(3):
            prefix = "::".join(scope + [m.group(3)])
            for member in m.group(4).split(","):
                member = member.split("=")[0].strip()
                if re.fullmatch(r"[A-Za-z_]\w*", member) and scope:
                    enums.add(f"{prefix}::{member}")
            continue
        if m.group(0) == "{":
            stack.append(None)
        elif stack:
            stack.pop()
    return classes, enums


_POPLIBS_LIBS = "popops|poplin|popnn|poprand|popsparse|popfloat|poputil|poplibs_support"
_ENGINE_OPTION = re.compile(
    r'"((?:autoReport|debug|opt|target|profiler|exchange|mem|codelets|engine|instrument)(?:\.[a-zA-Z]\w*)+)"'
)
_VERTEX_STRING = re.compile(rf'"((?:{_POPLIBS_LIBS})(?:::[A-Za-z_]\w*)*::[A-Z]\w*)"')


def regen_poplibs(sources: list[Checkout]) -> None:
    """PopLibs vertex / codelet class names and the enum members that appear as template arguments,
    united over every ref given (vertices were renamed between SDK releases: ``...Supervisor`` in 2.x,
    ``...MultiVertex`` later; public output of every release names them)."""
    libs = _POPLIBS_LIBS.split("|")
    classes: set[str] = set()
    enums: set[str] = set()
    options: set[str] = set()
    commits: list[str] = []
    for src in sources:
        for path in src.files(r".*\.(?:cpp|hpp|py)"):
            options.update(_ENGINE_OPTION.findall(src.read(path)))
        commits.append(f"{src.ref or 'working tree'} {src.commit()}")
        codelets = src.files(rf"lib/(?:{_POPLIBS_LIBS})/codelets/.*\.(?:cpp|hpp|h)")
        headers = src.files(rf"(?:include|lib)/(?:{_POPLIBS_LIBS})/.*\.(?:hpp|h)")
        hosts = src.files(rf"lib/(?:{_POPLIBS_LIBS})/[^/]*\.cpp")
        for path in codelets:
            found, members = cxx_declarations(src.read(path))
            classes |= {c for c in found if c.split("::")[0] in libs}
            enums |= members
        for path in headers:
            _, members = cxx_declarations(src.read(path))
            enums |= {e for e in members if e.split("::")[0] in libs}
        for path in hosts:  # names the host code asks for by string (``"popops::Fill"``)
            classes.update(_VERTEX_STRING.findall(src.read(path)))
    classes = {c for c in classes if c.rsplit("::", 1)[0] not in {e.rsplit("::", 1)[0] for e in enums}}
    repo = "graphcore/poplibs"
    commit = "; ".join(commits)
    n = write_names(
        "poplibs_vertices.txt",
        header(
            "PopLibs vertex and codelet class names (declared in the codelet sources, or named as strings "
            "by the host code)",
            repo,
            ["lib/*/codelets/**", "lib/*/*.cpp"],
            commit,
            "poplibs",
        ),
        classes,
    )
    m = write_names(
        "poplibs_template_values.txt",
        header(
            "PopLibs enum members that appear as vertex template arguments (popops::expr::BinaryOpType::ADD)",
            repo,
            ["include/**/*.hpp", "lib/**/*.hpp"],
            commit,
            "poplibs",
        ),
        enums,
    )
    k = write_names(
        "poplar_options.txt",
        header(
            "Poplar engine / target option names that PopLibs' sources and tests set (autoReport.directory)",
            repo,
            ["**/*.cpp", "**/*.hpp", "**/*.py"],
            commit,
            "poplibs",
        ),
        options,
    )
    print(f"poplibs: {n} vertex names, {m} enum members, {k} option names")


# -- PyTorch -----------------------------------------------------------------------------------------

_FUNC = re.compile(r"^- func:\s*([A-Za-z_][\w]*)(?:\.([A-Za-z_]\w*))?\s*\(", re.M)
_DERIVATIVE = re.compile(r"^- name:\s*([A-Za-z_]\w*)(?:\.\w+)?\s*\(", re.M)
_PYTORCH_PATHS = {
    "native": (
        "aten/src/ATen/native/native_functions.yaml",
        "torchgen/packaged/ATen/native/native_functions.yaml",
    ),
    "derivatives": ("tools/autograd/derivatives.yaml", "torchgen/packaged/autograd/derivatives.yaml"),
}


def _first(src: Checkout, candidates: tuple[str, ...]) -> tuple[str, str]:
    for path in candidates:
        try:
            return path, src.read(path)
        except (OSError, subprocess.CalledProcessError):
            continue
    raise SystemExit(f"none of {candidates} in {src.root}")


def autograd_prefix(name: str) -> str:
    """The class-name prefix PyTorch's code generator gives the backward node of ``name``
    (``mm`` -> ``MmBackward``; ``_foo_forward`` -> ``FooBackward``): title-cased ``_`` parts."""
    camel = "".join(part.title() for part in name.split("_"))
    return (camel + "Backward").replace("ForwardBackward", "Backward")


def _derivative_entries(text: str) -> Iterable[tuple[str, list[str], bool]]:
    """``(function name, dispatch keys, has a derivative)`` for each entry of derivatives.yaml."""
    blocks = re.split(r"^(?=- name:)", text, flags=re.M)
    for block in blocks:
        m = _DERIVATIVE.match(block)
        if m is None:
            continue
        keys = ["Default"]
        d = re.search(r"^  dispatch:\s*\n((?:    .*\n?)+)", block, re.M)
        if d is not None:
            keys = re.findall(r"^    ([A-Za-z]\w*):", d.group(1), re.M)
        formulas = [
            k
            for k in re.findall(r"^ {2,6}([A-Za-z_][\w, ]*):", block, re.M)
            if k.strip() not in {"dispatch", "output_differentiability", "result", "Default", "name"}
            and k.strip() not in keys
        ]
        differentiable = any("non_differentiable" not in line for line in formulas) or bool(formulas)
        yield m.group(1), keys, differentiable


def regen_pytorch(src: Checkout) -> None:
    """ATen operator names (``aten::add``, ``aten::add.Tensor``) and autograd node names."""
    commit = src.commit()
    native_path, native = _first(src, _PYTORCH_PATHS["native"])
    deriv_path, derivatives = _first(src, _PYTORCH_PATHS["derivatives"])
    ops: set[str] = set()
    for name, overload in _FUNC.findall(native):
        ops.add(f"aten::{name}")
        if overload:
            ops.add(f"aten::{name}.{overload}")
    counter: Counter[str] = Counter()
    nodes: set[str] = set()
    for name, keys, differentiable in _derivative_entries(derivatives):
        if not differentiable:
            continue
        for key in keys:
            prefix = autograd_prefix(name) + ("" if key == "Default" else key)
            nodes.add(f"{prefix}{counter[prefix]}")
            nodes.add(prefix)  # PyTorch before 1.10 named the nodes without the number
            counter[prefix] += 1
    repo = "pytorch/pytorch"
    n = write_names(
        "pytorch_operators.txt",
        header(
            "ATen operator names and overloads (native_functions.yaml)",
            repo,
            [native_path],
            commit,
            "pytorch",
        ),
        ops,
    )
    m = write_names(
        "pytorch_autograd_nodes.txt",
        header(
            "autograd node names generated from derivatives.yaml (XBackward0 ...; the bare XBackward of "
            "PyTorch before 1.10)",
            repo,
            [deriv_path],
            commit,
            "pytorch",
        ),
        nodes,
    )
    print(f"pytorch: {n} operator names, {m} autograd node names")


# -- CUDA and HIP API names (through HIPIFY's tables) -----------------------------------------------

_HIPIFY_ENTRY = re.compile(r'^\s*\{"((?:cuda|cu|CU)[A-Za-z0-9_]*)",\s*\{"([A-Za-z0-9_]*)"', re.M)


def regen_cuda(src: Checkout) -> None:
    """CUDA runtime and driver API function names, and the HIP names HIPIFY maps them to."""
    commit = src.commit()
    paths = ["src/CUDA2HIP_Runtime_API_functions.cpp", "src/CUDA2HIP_Driver_API_functions.cpp"]
    names: set[str] = set()
    for path in paths:
        for cuda, hip in _HIPIFY_ENTRY.findall(src.read(path)):
            if re.fullmatch(r"cu(?:da)?[A-Z]\w*", cuda):
                names.add(cuda)
            if re.fullmatch(r"hip[A-Z]\w*", hip):
                names.add(hip)
    n = write_names(
        "cuda_api.txt",
        header(
            "CUDA runtime and driver API function names and their HIP counterparts (HIPIFY's tables)",
            "ROCm/HIPIFY",
            paths,
            commit,
            "cuda",
        ),
        names,
    )
    print(f"cuda: {n} API names")


_HIP_DECLARED = re.compile(r"\b((?:__)?hip[A-Z]\w*)\s*\(")
_HIP_ALIAS = re.compile(r"^#define\s+hip[A-Z]\w*\s+(hip[A-Z]\w*)\s*$", re.M)


def regen_hip(src: Checkout) -> None:
    """HIP runtime API function names (the declarations of HIP's public headers), including the
    HIP-only calls that no CUDA name maps to (``hipExtModuleLaunchKernel``) and versioned aliases
    (``hipGetDevicePropertiesR0600``)."""
    commit = src.commit()
    paths = src.files(r"include/hip/[^/]*\.h")
    names: set[str] = set()
    for path in paths:
        text = src.read(path)
        names.update(_HIP_DECLARED.findall(text))
        names.update(_HIP_ALIAS.findall(text))
    n = write_names(
        "hip_api.txt",
        header("HIP runtime API function names (HIP's public headers)", "ROCm/HIP", paths, commit, "hip"),
        names,
    )
    print(f"hip: {n} API names")


# -- NCCL ---------------------------------------------------------------------------------------------


def _py_list(text: str, name: str) -> list[str]:
    m = re.search(rf"^{name}\s*=\s*\[([^\]]*)\]", text, re.M)
    return re.findall(r'"([^"]+)"', m.group(1)) if m else []


#: The argument lists NCCL kernels are printed with (the signature of the ``__global__`` functions:
#: ``ncclDevKernelArgsStorage<4096ul>`` from 2.19, ``ncclDevComm*, unsigned long, ncclWork*`` in 2.12 to
#: 2.18, ``ncclWorkElem`` before), as they appear in public traces (fixtures/real/traces).
NCCL_ARGUMENT_LISTS = (
    "ncclDevKernelArgsStorage<4096ul>",
    "ncclDevComm*, unsigned long, ncclWork*",
    "ncclDevComm*, unsigned long, ncclWork*, int",
    "ncclDevComm*, ncclWorkElem*",
    "ncclWorkElem",
)


def regen_nccl(src: Checkout, old_ref: str | None) -> None:
    """The parts NCCL kernel names are made of, for the current and the pre-2.19 naming."""
    commit = src.commit()
    gen = src.read("src/device/generate.py")
    parts = {
        "collectives": _py_list(gen, "all_colls"),
        "reductions": _py_list(gen, "all_redops"),
        "types": _py_list(gen, "all_tys"),
        "protocols": _py_list(gen, "all_protos"),
        "algorithms": _py_list(gen, "all_algos"),
    }
    provenance = {
        "what": "NCCL kernel name parts: ncclDevKernel_<coll>[_<redop>_<type>]_<algo>_<proto> (2.19 and later)",
        "repository": "NVIDIA/nccl",
        "paths": ["src/device/generate.py"],
        "commit": commit,
        "regenerate": "python tools/regenerate_vocabulary.py nccl CHECKOUT --old-ref v2.18.6-1",
    }
    data: dict = {"current": parts, "argument_lists": list(NCCL_ARGUMENT_LISTS)}
    if old_ref:
        common = src.read("src/collectives/device/common.h", old_ref)
        devcomm = src.read("src/include/devcomm.h", old_ref)
        collectives_h = src.read("src/include/collectives.h", old_ref)
        enum = re.search(r"enum ncclDevRedOp_t \{([^}]*)\}", collectives_h)
        data["legacy"] = {
            "collectives": sorted(set(re.findall(r"\bncclFunc([A-Z][a-z]\w+)\b", devcomm)) - {"Nop", "Str"}),
            "reductions": re.findall(r"ncclDev(\w+)", enum.group(1)) if enum else [],
            "types": sorted(set(re.findall(r"IMPL_COLL3\(func, devredop, (\w+),", common)) - {"type"}),
            "protocols": sorted(set(re.findall(r"#define NCCL_PROTO_([A-Z0-9]+) \d", devcomm))),
            "algorithms": sorted(set(re.findall(r"#define NCCL_ALGO_([A-Z_]+) \d", devcomm))),
        }
        provenance["legacy"] = {
            "what": "ncclKernel_<coll>_<algo>_<proto>_<redop>_<type> (2.8 to 2.18)",
            "paths": [
                "src/collectives/device/common.h",
                "src/include/devcomm.h",
                "src/include/collectives.h",
            ],
            "commit": src.commit(old_ref),
        }
    write_json("nccl_kernels.json", provenance, data)
    print("nccl:", {k: len(v) for k, v in parts.items()})


# -- Kineto -------------------------------------------------------------------------------------------


#: Keys of PyTorch's own profiler output of 2021 (1.8 / 1.9) that no Kineto source holds, as a real
#: GPU trace of that year prints them (issue 24).
LEGACY_TRACE_KEYS = (
    "theoretical occupancy %",
    "computeProperties",
    "cupti_version",
    "cuda_runtime_version",
    "cuda_driver_version",
    "hip_runtime_version",
    "hip_driver_version",
    "rocprofiler-sdk_version",
)


def regen_kineto(sources: list[Checkout]) -> None:
    """Kineto's activity categories, trace keys and event ``args`` keys, united over every ref given
    (older releases print older keys: ``external id``)."""
    categories: set[str] = set()
    arg_keys: set[str] = set(LEGACY_TRACE_KEYS)
    trace_keys: set[str] = set()
    commits: list[str] = []
    paths = [
        "libkineto/include/ActivityType.h",
        "libkineto/include/MetadataFieldCatalog.h",
        "libkineto/src/*.cpp",
    ]
    for src in sources:
        commits.append(f"{src.ref or 'working tree'} {src.commit()}")
        for name in ("libkineto/include/ActivityType.h", "libkineto/src/ActivityType.cpp"):
            try:
                text = src.read(name)
            except (OSError, subprocess.CalledProcessError):
                continue
            categories |= set(re.findall(r'\{"([a-z][a-z0-9_]*)",\s*ActivityType::', text))
        with contextlib.suppress(OSError, subprocess.CalledProcessError):  # older releases have no catalog
            catalog = src.read("libkineto/include/MetadataFieldCatalog.h")
            arg_keys |= set(re.findall(r'\bk[A-Z]\w*\{\s*"([^"]+)"\s*\}', catalog))
        for path in src.files(r"libkineto/src/[^/]*\.cpp"):
            text = src.read(path)
            arg_keys |= set(re.findall(r'add\w*\(\s*"([^"]+)"', text))
            found = set(re.findall(r'"([A-Za-z][A-Za-z0-9 _.%()/#-]{0,40})": ', text))
            (trace_keys if path.endswith("output_json.cpp") else arg_keys).update(found)
    categories.discard("ENUM_COUNT")
    write_json(
        "kineto.json",
        {
            "what": "Kineto activity categories, trace keys and args keys",
            "repository": "pytorch/kineto",
            "paths": paths,
            "commit": "; ".join(commits),
            "regenerate": "python tools/regenerate_vocabulary.py kineto CHECKOUT [--ref REF ...]",
            "legacy": "LEGACY_TRACE_KEYS in tools/regenerate_vocabulary.py: keys of PyTorch's own 2021 profiler output",
        },
        {"categories": sorted(categories), "trace_keys": sorted(trace_keys), "arg_keys": sorted(arg_keys)},
    )
    print(f"kineto: {len(categories)} categories, {len(trace_keys)} trace keys, {len(arg_keys)} args keys")


# -- Poplar text summaries ------------------------------------------------------------------------------

_LABEL_LINE = re.compile(r"^\s*(?P<label>[A-Z][A-Za-z0-9 ()#/.,'-]*?[A-Za-z)])\s*:\s*(?P<value>.*?)\s*$")
_VALUE_OK = re.compile(
    r"|[-+]?\d[\d,]*(?:\.\d+)?\s*(?:[kKMG]?B|[kMG]?Hz|K)?(?:\s*\(.*\))?(?:\s+on tile [\d,]+)?"
    r"|Must enable [\w.]+|Estimated \(must enable [\w.]+\)|<anonymous>\.?|\d[\d,]*\s+B"
)
_BARE_HEADING = re.compile(r"^\s*([A-Z][a-z]+(?: [A-Z][a-z]+){1,3})\s*$")
_TILE_COUNT = re.compile(r"^\s*\d[\d,]*\s+(tile\(s\) out of memory)\s*$")
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")

#: Labels of layouts no sample here prints, each with where it was read: graphcore/tensorflow,
#: tensorflow/compiler/plugin/poplar/docs/logging.rst, commit 2b42c68419beaf3bbd27c77ed1849cf110ae63a7
#: (Target / Graph / Memory Usage of an SDK 1.x summary) and the SDK 2.x/3.x facts listed in
#: fixtures/real/poplar/README.md ("Layouts not among these samples").
KNOWN_LAYOUT_LABELS = (
    "Graph",
    "Number of vertices",
    "Number of edges",
    "Number of variables",
    "Number of compute sets",
    "Host Exchange Packet Headers",
    "Global Exchange Packet Headers",
    "Stack",
    "Control Table",
    "Global Exchange Code",
    "Instrumentation Results",
    "Shared Code Storage",
    "Shared Data Storage",
    "Padding",
    "By Type",
    "Not Overlapped",
    "Overlapped",
    "Total After Overlapping",
    "Program and Sync IDs",
    "Internal Exchange Message Buffers",
    "Host Exchange Message Buffers",
    "Vertex Code (<n> B)",
    "Vertex Data (<n>B)",
    "Range (KB)",
    "Histogram (Excluding Gaps)",
    "Count (tiles)",
    "<n> tile(s) out of memory",
    "Tile # <n> memory usage",
)


def summary_labels(text: str) -> set[str]:
    """The labels of a Poplar text summary: ``Label:`` headings, ``Label: <number>`` lines (never a
    line whose value is a name: ``Programs executed: main`` gives only its label), headings printed
    without a colon (``Not Overlapped``) and the histogram's column titles. A number inside a label
    (``Tile # 289 memory usage``) is written ``<n>``."""
    labels: set[str] = set()
    for line in text.splitlines():
        m = _LABEL_LINE.match(line)
        if m is not None and "instances" not in m["label"]:
            if _VALUE_OK.fullmatch(m["value"]) or m["label"] == "Programs executed":
                labels.add(_NUMBER.sub("<n>", m["label"]))
            continue
        if (b := _BARE_HEADING.match(line)) is not None:
            labels.add(b.group(1))
        elif (t := _TILE_COUNT.match(line)) is not None:
            labels.add("<n> " + t.group(1))
        elif line.strip().startswith("Range (") and "Histogram" in line:
            labels.update(re.split(r"\s{2,}|(?<=\)) (?=[A-Z])", line.strip()))
    return labels


def regen_summary(dirs: list[str]) -> None:
    """Labels of every Poplar text summary under the given directories (``*.txt``, ``*.log``), and
    :data:`KNOWN_LAYOUT_LABELS`."""
    labels: set[str] = set(KNOWN_LAYOUT_LABELS)
    paths: list[str] = []
    for d in dirs:
        for path in sorted(Path(d).rglob("*")):
            if (
                path.suffix in {".txt", ".log", ".rep"}
                and path.is_file()
                and not path.name.startswith("LICENSE")
            ):
                found = summary_labels(path.read_text("utf-8", "replace"))
                if found:
                    labels |= found
                    paths.append(path.as_posix())
    n = write_names(
        "text_summary_labels.txt",
        header(
            "labels of Poplar's text summary (printProfileSummary) in every layout known here; <n> is a "
            "number (labels of layouts without a sample: KNOWN_LAYOUT_LABELS in tools/regenerate_vocabulary.py)",
            "popprof (Poplar output in these paths: see fixtures/real/poplar/README.md for each origin)",
            paths,
            "the popprof commit that adds this file",
            "summary",
        ),
        labels,
    )
    print(f"summary: {n} labels from {len(paths)} files")


# -- Names seen in public output: Poplar runtime vertices, GPU kernel identifiers ----------------------

#: ``poplar_rt::`` vertices (Poplar's own copy / memcpy / seed vertices: Poplar's source is not public, so
#: the names come from public Poplar output). Each with where it was printed: graphcore/tensorflow,
#: tensorflow/compiler/plugin/poplar/docs/logging.rst, commit 2b42c684 (a memory summary By Type);
#: graphcore/tutorials (fixtures/real/poplar); other public repositories found with the code search
#: (an execution summary of a halo-exchange study; JAX tile-vertex code).
KNOWN_RUNTIME_VERTICES = (
    "poplar_rt::DstStridedCopy64BitMultiAccess",  # graphcore/tensorflow logging.rst
    "poplar_rt::StridedCopyDA32",  # graphcore/tensorflow logging.rst
    "poplar_rt::DstStridedCopyDA32",  # graphcore/tensorflow logging.rst; halo-exchange summary
    "poplar_rt::ShortMemcpy",  # graphcore/tutorials tut6; halo-exchange summary
    "poplar_rt::DstLongStridedCopy",  # halo-exchange summary
    "poplar_rt::Memcpy64Bit",  # halo-exchange summary
    "poplar_rt::TimeItStart",  # JAX tile-vertex code
    "poplar_rt::SetHwSeedsSupervisor",  # JAX tile-vertex code
)

_RUNTIME_VERTEX = re.compile(r"\bpoplar_rt::[A-Z]\w*")


def regen_runtime(dirs: list[str]) -> None:
    """``poplar_rt::`` vertex names printed in the Poplar output under ``dirs``, and
    :data:`KNOWN_RUNTIME_VERTICES`."""
    names = set(KNOWN_RUNTIME_VERTICES)
    paths = []
    for d in dirs:
        for path in sorted(p for p in Path(d).rglob("*.txt") if not p.name.startswith("LICENSE")):
            found = _RUNTIME_VERTEX.findall(path.read_text("utf-8", "replace"))
            if found:
                names.update(found)
                paths.append(path.as_posix())
    n = write_names(
        "poplar_runtime_vertices.txt",
        header(
            "Poplar runtime vertex names (poplar_rt::), as printed in public Poplar output (KNOWN_RUNTIME_"
            "VERTICES in tools/regenerate_vocabulary.py says where each was printed)",
            "popprof (fixtures/real/poplar) and graphcore/tensorflow (docs/logging.rst, commit 2b42c684)",
            paths,
            "the popprof commit that adds this file",
            "runtime",
        ),
        names,
    )
    print(f"runtime: {n} poplar_rt names")


_IDENT = re.compile(r"[A-Za-z_]\w*")
#: Kernel identifiers of public traces that the traces here do not hold (popprof's vocabulary before
#: these files: cuBLAS and PyTorch kernels seen in public traces, such as a 2021 GPU trace's
#: ``gemmSN_TN_kernel``), and the C++ words every signature uses.
KNOWN_KERNEL_IDENTIFIERS = tuple(
    """
    void int long short char float double bool unsigned signed const volatile auto decltype nullptr true
    false operator lambda anonymous namespace struct class enum typename template type value half half2
    nv_bfloat16 nv_half __half __nv_bfloat16 bfloat16 int8_t int16_t int32_t int64_t uint8_t uint16_t
    uint32_t uint64_t size_t ptrdiff_t float2 float4 int2 int4 char4 uchar4 double2 long2 longlong2 ulong2
    uint2 uint4 Kernel Params gemvNSP_kernel gemv2N_kernel gemv2T_kernel_val gemvx gemmk1_kernel
    gemmSN_TN_kernel gemmSN_NN_kernel gemmSN_NT_kernel scal_kernel splitKreduce_kernel sgemm_largek_lds64
    dot_kernel reduce_1Block_kernel axpy_kernel_val asum_kernel nrm2_kernel gemv2N_kernel_val gemv2T_kernel
    gemm_kernel kernel gemv_kernel elementwise_kernel vectorized_elementwise_kernel reduce_kernel
    unrolled_elementwise_kernel softmax_warp_forward softmax_warp_backward cunn_SoftMaxForward
    cunn_SoftMaxBackward indexSelectLargeIndex indexSelectSmallIndex distribution_elementwise_grid_stride_kernel
    TrivialOffsetCalculator OffsetCalculator IntDivider LoadWithoutCast StoreWithoutCast LoadWithCast
    StoreWithCast elementwise_kernel_with_index function_traits biasType
    BFloat16 multimem_all_reduce_kernel one_shot_all_reduce_kernel two_shot_all_reduce_kernel
    two_shot_all_reduce_kernel_inplace
    """.split()  # noqa: SIM905
    #: (the last line: PyTorch's c10::BFloat16 and its symmetric-memory collective kernels,
    #: torch/csrc/distributed/c10d/symm_mem: public names that decide a device category, so redaction keeps the
    #: communication figures; seen in AMD-AGI/TraceLens's B200 trace, fixtures/real/traces)
)
_KERNEL_CATS = {"kernel", "Kernel"}


def _trace_kernel_names(path: Path) -> set[str]:
    import gzip

    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        try:
            doc = json.load(handle)
        except ValueError:
            return set()
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    return {
        e["name"]
        for e in events
        if isinstance(e, dict) and e.get("cat") in _KERNEL_CATS and isinstance(e.get("name"), str)
    }


def regen_kernels(dirs: list[str]) -> None:
    """Identifiers of the GPU kernel names in public traces (``void at::native::...``): every C++
    identifier of a kernel signature (namespaces, templates, functors, lambdas' enclosing functions),
    and the ``_`` parts of generated cuBLAS / cuDNN / CUTLASS names."""
    idents: set[str] = set(KNOWN_KERNEL_IDENTIFIERS)
    parts: set[str] = set()
    paths = []
    for d in dirs:
        for path in sorted(Path(d).rglob("*.json*")):
            names = _trace_kernel_names(path)
            if not names:
                continue
            paths.append(path.as_posix())
            for name in names:
                if name.startswith("_Z") or name.startswith(("ncclKernel_", "ncclDevKernel_")):
                    continue  # mangled symbols stay non-public; NCCL names have their own grammar
                if re.fullmatch(r"[a-z0-9]+(?:_[A-Za-z0-9]+)+", name):
                    parts.update(name.split("_"))  # a generated name: ampere_sgemm_128x64_nn
                    continue
                for ident in _IDENT.findall(name):
                    if ident.startswith("Cijk_"):
                        continue  # Tensile's generated names encode tuning choices: not kept public
                    if "_" in ident and re.fullmatch(r"(?:cutlass|sm\d+|ampere|volta|turing)_\w+", ident):
                        parts.update(ident.split("_"))
                    else:
                        idents.add(ident)
    source = (
        "facebookresearch/HolisticTraceAnalysis (tests/data, commit f4d0062c; copies in fixtures/real/traces)"
    )
    n = write_names(
        "gpu_kernel_identifiers.txt",
        header(
            "C++ identifiers of GPU kernel names in public PyTorch profiler traces",
            source,
            paths,
            "f4d0062c (see fixtures/real/traces/README.md)",
            "kernels",
        ),
        idents,
    )
    m = write_names(
        "gpu_kernel_parts.txt",
        header(
            "underscore parts of generated cuBLAS / cuDNN / CUTLASS kernel names in public traces",
            source,
            paths,
            "f4d0062c (see fixtures/real/traces/README.md)",
            "kernels",
        ),
        parts,
    )
    print(f"kernels: {n} identifiers, {m} name parts")


SOURCES = ("poplibs", "pytorch", "cuda", "hip", "nccl", "kineto", "summary", "runtime", "kernels")
#: Sources that read directories of public output instead of one repository.
DIRECTORY_SOURCES = {"summary": regen_summary, "runtime": regen_runtime, "kernels": regen_kernels}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", choices=SOURCES)
    parser.add_argument("checkout", nargs="+", help="the source's repository (summary: directories of text)")
    parser.add_argument(
        "--ref",
        action="append",
        help="read this git ref instead of the working tree (a bare clone); poplibs: repeat to unite releases",
    )
    parser.add_argument("--old-ref", help="nccl: a tag before 2.19 for the legacy kernel names")
    args = parser.parse_args(argv)
    if args.source in DIRECTORY_SOURCES:
        DIRECTORY_SOURCES[args.source](args.checkout)
        return 0
    refs = args.ref or [None]
    src = Checkout(args.checkout[0], refs[0])
    if args.source == "poplibs":
        regen_poplibs([Checkout(args.checkout[0], ref) for ref in refs])
    elif args.source == "pytorch":
        regen_pytorch(src)
    elif args.source == "cuda":
        regen_cuda(src)
    elif args.source == "hip":
        regen_hip(src)
    elif args.source == "nccl":
        regen_nccl(src, args.old_ref)
    elif args.source == "kineto":
        regen_kineto([Checkout(args.checkout[0], ref) for ref in refs])
    return 0


if __name__ == "__main__":
    sys.exit(main())
