"""The public vocabulary of redaction, kept as data files with their provenance.

One file per public source (PopLibs, Poplar's output, PyTorch, CUDA/HIP, NCCL, Kineto, public GPU
traces). Each text file opens with ``#`` lines naming the repository, the paths and the commit it
was read from, then holds one name a line; JSON files carry the same facts under ``provenance``.
``tools/regenerate_vocabulary.py`` (in the source tree, not in the wheel) rewrites them from a
checkout of the source (run by hand, never at run time). Read here through
:mod:`importlib.resources`, so they work from a wheel.
"""

from __future__ import annotations

import functools
import json
from importlib import resources

#: Text vocabulary files (one name a line) and what each holds.
NAME_FILES: dict[str, str] = {
    "poplibs_vertices.txt": "PopLibs vertex and codelet class names",
    "poplibs_template_values.txt": "PopLibs enum members used as vertex template arguments",
    "poplar_options.txt": "Poplar engine / target option names (autoReport.directory)",
    "poplar_runtime_vertices.txt": "Poplar runtime (poplar_rt::) vertex names printed in public output",
    "text_summary_labels.txt": "labels of Poplar's text summary (<n> stands for a number)",
    "pytorch_operators.txt": "ATen operator names and overloads",
    "pytorch_autograd_nodes.txt": "autograd node names",
    "cuda_api.txt": "CUDA runtime / driver API names and their HIP counterparts",
    "hip_api.txt": "HIP runtime API names (HIP's public headers)",
    "gpu_kernel_identifiers.txt": "C++ identifiers of GPU kernel names in public traces",
    "gpu_kernel_parts.txt": "underscore parts of generated cuBLAS / cuDNN / CUTLASS kernel names",
}
#: JSON vocabulary files.
JSON_FILES: dict[str, str] = {
    "nccl_kernels.json": "the parts NCCL kernel names are made of",
    "kineto.json": "Kineto categories, trace keys and args keys",
    "pytorch_profiler.json": "PyTorch profiler values, older keys, prim:: operators, collectives, optimizers",
    "gpu_kernel_names.json": "kernel-signature namespaces, generated-kernel parts, exception classes",
}


def _text(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text("utf-8")


@functools.cache
def names(name: str) -> frozenset[str]:
    """The names of one text vocabulary file (comment lines left out)."""
    if name not in NAME_FILES:
        raise KeyError(f"no vocabulary file {name!r}; known: {', '.join(NAME_FILES)}")
    return frozenset(
        line.rstrip("\n") for line in _text(name).splitlines() if line.strip() and not line.startswith("#")
    )


@functools.cache
def data(name: str) -> dict:
    """The content of one JSON vocabulary file."""
    if name not in JSON_FILES:
        raise KeyError(f"no vocabulary file {name!r}; known: {', '.join(JSON_FILES)}")
    return json.loads(_text(name))


def provenance(name: str) -> dict[str, list[str]]:
    """Where one file came from: ``{"repository": [...], "path": [...], "commit": [...], ...}``."""
    if name in JSON_FILES:
        prov = data(name)["provenance"]
        return {
            "repository": [prov["repository"]],
            "path": list(prov["paths"]),
            "commit": [prov["commit"]],
            "regenerate": [prov["regenerate"]],
        }
    out: dict[str, list[str]] = {}
    for line in _text(name).splitlines():
        if not line.startswith("#"):
            break
        key, sep, value = line[1:].strip().partition(": ")
        if sep and key in {"repository", "path", "commit", "regenerate", "popprof redaction vocabulary"}:
            out.setdefault(key, []).append(value)
    return out
