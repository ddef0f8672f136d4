"""Which call a CPU sample of a host thread was inside, from its call stack.

A host thread can be on CPU and still be waiting: a synchronous ``cudaMemcpy`` spins in the driver until the
device is done, and an MPI rank in ``MPI_Recv`` polls its network library until the message arrives. Context
switches count both as on CPU; the sample's call stack tells them from computing. A sample's call is the
category of the **outermost** frame (nearest the root) that names one: what the program called, so an
``MPI_Recv`` that copies through ``cudaMemcpy`` inside (CUDA-aware MPI) is communication.

- ``host_wait``: a host call blocking on the device, the same calls the device map marks ``host_wait``
  (:data:`popprof.trace.device.SYNC_CALLS`: the synchronisations, synchronous copies and ``cudaFree``; the
  driver's versioned symbols too, ``cuMemcpyDtoH_v2``);
- ``communication``: MPI (its API, ``PMPI_`` profiling names and MPICH's and Open MPI's internals), NCCL/RCCL's
  host API, and the network libraries they poll (libfabric and its providers, UCX, verbs, PSM2), by the
  frame's function or, for a frame without a symbol, by its module (``libmpi*``, ``libfabric*``, ...).

Everything else is ``other``: the program's own work or a runtime's CPU work (a launch, an allocation). A
sample without a call stack has no category (missing): unknown, not ``other``.

Stacks get cut: a sample polling deep in a network library may keep its leaf frame only, and then names no
call. When the thread's MPI calls are traced too (ranges named as MPI's API names them, ``MPI_Recv``: nsys's
MPI trace writes them as NVTX ranges), a sample of that thread inside one of those ranges is ``communication``
whatever its stack names (:func:`inside_ranges`; the reader applies it): the trace shows the outer call, and
the outermost decides. A sample without a stack stays missing.

The categories are public words (the redaction keeps them), so a redacted bundle judges its samples as the
original does. ``docs/readers.md`` lists the patterns.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .device import HOST_WAIT, SYNC_CALLS
from .spans import merge_intervals

#: a sample polling in MPI, NCCL or a network library
COMMUNICATION = "communication"
#: a sample in neither: computing (the program's own work, or a runtime's on the CPU)
OTHER = "other"
#: the categories a sample's call can take (the order is the codes': 1, 2, 3)
SAMPLE_CALLS: tuple[str, ...] = (HOST_WAIT, COMMUNICATION, OTHER)

_SYNC_FUNCTION = re.compile(rf"^(?:{SYNC_CALLS})(?:_v\d+)?$")
#: MPI's API and profiling names (``MPI_Recv``, ``PMPI_Recv``, ``MPIX_``), MPICH's internals (``MPIR_``,
#: ``MPID_``, ``MPIDI_``, ``MPIDU_``, ``MPII_``, ``MPL_``), Open MPI's (``ompi_``, ``opal_progress``,
#: ``mca_pml_`` / ``mca_btl_`` / ``mca_coll_`` / ``mca_mtl_`` / ``mca_osc_``), NCCL's host API (``ncclAllReduce``,
#: ``ncclGroupEnd``; RCCL's are the same), libfabric (``fi_``, ``ofi_``, the Slingshot provider's ``cxip_``),
#: UCX (``ucp_``, ``uct_``, ``ucs_``), verbs (``ibv_``, ``mlx5_``), PSM2 (``psm2_``)
_COMMUNICATION_FUNCTION = re.compile(
    r"^(?:P?MPIX?_[A-Z]|MPI(?:R|D|DI|DU|I)_|MPL_|ompi_|opal_progress|mca_(?:pml|btl|coll|mtl|osc)_|nccl[A-Z]"
    r"|fi_|ofi_|cxip_|uc[pts]_|ibv_|mlx5_|psm2_)"
)
#: a frame's module (its file name) of an MPI or network library, for frames without a symbol
_COMMUNICATION_MODULE = re.compile(r"^lib(?:mpi|fabric|ucp|uct|ucs|ibverbs|mlx5|psm2|nccl|rccl|cxi)")


#: an MPI call's name as a trace names its range: ``MPI_Send``, ``MPI_Comm_rank``, ``PMPI_Recv``, ``MPIX_``
_MPI_RANGE = re.compile(r"^P?MPIX?_[A-Z][a-z0-9_]*$")


def _function_call(function: str | None) -> int:
    if not function:
        return 0
    if _SYNC_FUNCTION.match(function):
        return 1
    return 2 if _COMMUNICATION_FUNCTION.match(function) else 0


def function_calls(functions: list[str | None]) -> np.ndarray:
    """Each function name's call code: 0 none, 1 ``host_wait``, 2 ``communication`` (one regex per name)."""
    return np.array([_function_call(f) for f in functions], dtype=np.int8)


def module_calls(modules: list[str | None]) -> np.ndarray:
    """Each module path's call code (2 for an MPI or network library's file, else 0)."""
    names = [m.rsplit("/", 1)[-1] if m else "" for m in modules]
    return np.array([2 if _COMMUNICATION_MODULE.match(n) else 0 for n in names], dtype=np.int8)


def outermost_calls(sample: np.ndarray, depth: np.ndarray, code: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per sample that has one, the code of its outermost frame with a call (the deepest ``depth``: depth 0 is
    the leaf); frames given as parallel arrays. Returns the samples' ids and their codes."""
    named = code > 0
    sample, depth, code = sample[named], depth[named], code[named]
    order = np.lexsort((depth, sample))
    sample, code = sample[order], code[order]
    last = np.ones(sample.size, dtype=bool)
    last[:-1] = sample[1:] != sample[:-1]
    return sample[last], code[last]


def mpi_ranges(names: pd.Series) -> np.ndarray:
    """Which ranges name an MPI call (``MPI_Send``, ``MPI_Comm_rank``; not ``MPI Rank 0`` nor ``MPI_SEND``): each
    distinct name is matched once."""
    codes, uniques = pd.factorize(names.astype(object))
    named = np.array([isinstance(u, str) and bool(_MPI_RANGE.match(u)) for u in uniques] + [False])
    return named[codes]  # a missing name's code -1 takes the False at the end


def inside_ranges(
    thread: np.ndarray, ts: np.ndarray, range_thread: np.ndarray, start: np.ndarray, end: np.ndarray
) -> np.ndarray:
    """Whether each sample (its thread key and time) falls inside one of its own thread's ranges ``[start,
    end)``: per thread with ranges (an MPI rank has one or a few), the ranges merged and the samples placed among
    them by one binary search."""
    inside = np.zeros(ts.size, dtype=bool)
    for key in np.unique(range_thread):
        mine = range_thread == key
        ms, me = merge_intervals(start[mine], end[mine])
        rows = np.flatnonzero(thread == key)
        at = np.searchsorted(ms, ts[rows], side="right") - 1
        inside[rows] = (at >= 0) & (ts[rows] < me[np.maximum(at, 0)])
    return inside
