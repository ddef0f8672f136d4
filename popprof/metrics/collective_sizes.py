"""What one collective call is: its type and its message size, from the names and args of a Kineto trace.

The type comes from the args' ``Collective name`` or the kernel's name (:func:`collective_kind`). The size
from the kernel's own args (PyTorch 2.2 and later: ``In msg nelems``, ``Out msg nelems``, ``dtype``,
:func:`args_fields`), else from the ``nccl:<collective>`` host op around its launch call (older PyTorch:
``Input Dims``, ``Input type``, :func:`host_op_sizes`). Read by :mod:`popprof.metrics.collectives`;
``docs/collectives.md`` has the rules.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd

from ..model.profile import Profile
from ..trace.masks import rank_array, stream_mask

#: Element sizes in bytes of the ``dtype`` names PyTorch writes into ``record_param_comms`` args.
DTYPE_BYTES: dict[str, int] = {
    "Float": 4,
    "Double": 8,
    "Half": 2,
    "BFloat16": 2,
    "ComplexHalf": 4,
    "ComplexFloat": 8,
    "ComplexDouble": 16,
    "Byte": 1,
    "Char": 1,
    "Bool": 1,
    "Short": 2,
    "Int": 4,
    "Long": 8,
    "UInt16": 2,
    "UInt32": 4,
    "UInt64": 8,
    "Float8_e5m2": 1,
    "Float8_e4m3fn": 1,
    "Float8_e5m2fnuz": 1,
    "Float8_e4m3fnuz": 1,
}

#: The collective of a kernel or args name, by the first pattern that matches (case-insensitive); XLA's HLO
#: names (a TPU's ops) spell them with hyphens: ``all-reduce``, ``all-gather.1``, ``collective-permute``.
_KINDS: tuple[tuple[str, str], ...] = (
    ("all[_-]?reduce", "all_reduce"),
    ("all[_-]?gather", "all_gather"),
    ("reduce[_-]?scatter", "reduce_scatter"),
    ("all[_-]?to[_-]?all", "all_to_all"),
    ("collective[_-]permute", "send_recv"),
    ("broadcast", "broadcast"),
    ("send_?recv|sendrecv|send|recv", "send_recv"),
    ("reduce", "reduce"),
)


def collective_kind(name: str) -> str:
    """``all_reduce``, ``all_gather``, ... of a collective's name (``other`` when none fits).

    The kernel name's operation (``ncclKernel_AllReduce_...``, ``ncclDevKernel_AllGather_...``) or the args'
    ``Collective name`` (``allreduce``, ``_allgather_base``, ``all_to_allv``)."""
    head = str(name)
    for prefix in ("ncclDevKernel_", "ncclKernel_"):
        if head.startswith(prefix):  # the operation is the name's next word: ncclKernel_AllReduce_RING_LL
            head = head[len(prefix) :].split("_")[0]
    lowered = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", head).lower()
    for pattern, kind in _KINDS:
        if re.search(pattern, lowered):
            return kind
    return "other"


def args_fields(args: pd.Series) -> pd.DataFrame:
    """The collective fields of each kernel's args (JSON text; missing where absent)."""
    rows = []
    for text in args:
        try:
            value = json.loads(text) if isinstance(text, str) else {}
        except ValueError:
            value = {}
        value = value if isinstance(value, dict) else {}
        nelems = [value.get("In msg nelems"), value.get("Out msg nelems")]
        nelems = [float(x) for x in nelems if isinstance(x, (int, float))]
        size = DTYPE_BYTES.get(str(value.get("dtype")), np.nan)
        group = value.get("Group size")
        rows.append(
            (
                value.get("Collective name"),
                value.get("Process Group Name"),
                max(nelems) * size if nelems else np.nan,
                float(group) if isinstance(group, (int, float)) else np.nan,
            )
        )
    return pd.DataFrame(rows, columns=["collective", "group", "bytes", "group_size"], index=args.index)


#: Element sizes in bytes of the C++ type names older PyTorch records in ``Input type`` of ``nccl:*`` ops.
CPP_TYPE_BYTES: dict[str, int] = {
    "float": 4,
    "double": 8,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "long int": 8,
    "long": 8,
    "int64_t": 8,
    "int": 4,
    "short int": 2,
    "short": 2,
    "signed char": 1,
    "unsigned char": 1,
    "char": 1,
    "bool": 1,
}
#: How many levels above a launch call its collective's ``nccl:*`` op may be.
_HOST_OP_DEPTH = 4


def host_op_sizes(profile: Profile, rows: np.ndarray) -> pd.DataFrame:
    """For each collective kernel of ``rows``, the size its launching host op records, where the kernel's
    own args have none (PyTorch before 2.2): the launch call (same rank and correlation id) sits inside a
    ``nccl:<collective>`` op whose ``Input Dims`` and ``Input type`` give the input tensor. ``bytes`` is
    its element count x element size (NaN where not found), ``collective`` the op's collective (None where
    not found); ``per_rank_input`` marks an all_gather (its input is one rank's part)."""
    events = profile.events
    out = pd.DataFrame(
        {
            "bytes": np.full(len(rows), np.nan),
            "per_rank_input": np.zeros(len(rows), bool),
            "collective": np.full(len(rows), None, dtype=object),
        }
    )
    if not {"correlation", "parent_id", "stream", "event_id", "args"} <= set(events.columns):
        return out
    rank = rank_array(profile)
    correlation = events["correlation"].to_numpy(dtype=np.float64, na_value=np.nan)
    host = np.flatnonzero(~stream_mask(profile) & ~np.isnan(correlation))
    if host.size == 0:  # no host call carries a correlation id (a TPU's XPlane: its collectives launch none)
        return out
    host_keys = pd.Index(rank[host] * (1 << 40) + correlation[host].astype(np.int64))
    keep = ~host_keys.duplicated(keep="last")
    host, host_keys = host[keep], host_keys[keep]
    ok = ~np.isnan(correlation[rows])
    want = np.full(len(rows), -1, dtype=np.int64)
    want[ok] = rank[rows][ok] * (1 << 40) + correlation[rows][ok].astype(np.int64)
    position = host_keys.get_indexer(want)
    current = np.where((position >= 0) & ok, host[np.maximum(position, 0)], -1)
    names = events["name"].array
    is_op = np.asarray(names.categories.astype(str).str.startswith("nccl:"), dtype=bool)
    codes = np.asarray(names.codes)
    ids = pd.Index(events["event_id"].to_numpy())
    parent = events["parent_id"].to_numpy(dtype=np.float64, na_value=np.nan)
    found = np.full(len(rows), -1, dtype=np.int64)
    for _ in range(_HOST_OP_DEPTH):  # up the nesting, one level per pass over the unresolved kernels
        live = (current >= 0) & (found < 0)
        if not live.any():
            break
        up = parent[current[live]]
        nxt = np.full(up.size, -1, dtype=np.int64)
        has = ~np.isnan(up)
        nxt[has] = ids.get_indexer(up[has].astype(np.int64))
        current[live] = nxt
        hit = live.copy()
        hit[live] = (nxt >= 0) & (codes[np.maximum(nxt, 0)] >= 0) & is_op[codes[np.maximum(nxt, 0)]]
        found[hit] = current[hit]
    sizes, gathers = out["bytes"].to_numpy(copy=True), out["per_rank_input"].to_numpy(copy=True)
    kinds = out["collective"].to_numpy(copy=True)
    args = events["args"].array
    for j in np.flatnonzero(found >= 0):
        try:
            value = json.loads(args[found[j]])
            dims, kind = value["Input Dims"][0], value["Input type"][0]
        except (TypeError, ValueError, KeyError, IndexError):
            continue
        if isinstance(dims, list) and all(isinstance(d, int) for d in dims) and kind in CPP_TYPE_BYTES:
            sizes[j] = float(np.prod(dims, dtype=np.float64)) * CPP_TYPE_BYTES[kind]
            kinds[j] = collective_kind(str(names[found[j]])[len("nccl:") :])
            gathers[j] = kinds[j] == "all_gather"
    return pd.DataFrame({"bytes": sizes, "per_rank_input": gathers, "collective": kinds})
