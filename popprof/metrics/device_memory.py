"""Device memory of a PyTorch trace recorded with ``profile_memory=True``, from its allocator events (the
``allocations`` table): per rank and device, the peak allocated, when and in which operator it was reached,
the peak reserved, and the blocks allocated and freed (docs/figures.md, "Device memory").

The peak is the allocator's own ``Total Allocated`` (what ``torch.cuda.max_memory_allocated`` counts, within
the trace) when every event of the device carries it (Kineto since about 2022). An older trace gives only each
block's size; its figure is then the peak of the blocks allocated less those freed since the trace began
(``basis: "net"``), which leaves out what was allocated before the profiler started.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model.profile import Profile
from ..trace.activity import OPERATOR_CHANNELS
from . import metric
from .peaks import device_properties
from .trace import parent_rows, time_origin

#: Operators that only allocate: a block allocated inside one belongs to the operator around it.
ALLOCATION_PRIMITIVES = frozenset(
    {"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::new_empty", "aten::new_empty_strided"}
)

#: How the peak was found: the allocator's totals, or the blocks' net sum since the trace began.
ALLOCATOR, NET = "allocator", "net"


def device_memory(profile: Profile, top: int = 3) -> list[dict]:
    """One record per (rank, device) with allocator events, GPUs first; ``[]`` without any. Each holds
    ``peak_allocated_bytes`` (``basis``: :data:`ALLOCATOR` or :data:`NET`), ``peak_at_us`` (from the trace's
    time origin), ``peak_op`` (the operator around the allocation that reached it), ``peak_reserved_bytes``,
    ``capacity_bytes`` (the GPU's memory, ``deviceProperties``' ``totalGlobalMem``; None when not given),
    the allocated and freed blocks (count, bytes), ``start_bytes``/``end_bytes`` (in use before the first
    event and after the last) and ``top_ops`` (the operators that allocated the most bytes)."""
    return profile.cached(f"device_memory.{top}", lambda: _device_memory(profile, top))


def _device_memory(profile: Profile, top: int) -> list[dict]:
    groups = _groups(profile)
    if not groups:
        return []
    capacity = _capacities(profile)
    alike = set(capacity.values())
    # a GPU the list does not number (AMD's roctracer names a GPU by its HSA agent, not its HIP index:
    # readers/chrome/allocations.py) has the memory every listed GPU has, when they all have the same
    anyone = alike.pop() if len(alike) == 1 else None
    origin = time_origin(profile) or 0.0
    out = [
        _one(rank, device, group, origin, top, capacity.get(device, anyone if device != "cpu" else None))
        for (rank, device), group in groups.items()
    ]
    return sorted(out, key=lambda r: (r["device"] == "cpu", r["rank"], r["device"]))


def _groups(profile: Profile) -> dict[tuple[int, str], pd.DataFrame]:
    """The allocator events per (rank, device), each in time order (stable): ``ts`` (absolute µs), ``bytes``
    (the block, negative when freed), ``total`` and ``reserved`` (the allocator's, NaN when not given) and
    ``op``; rank -1 when unknown. ``{}`` without any. Found once per profile scope."""
    return profile.cached("device_memory.groups", lambda: _build_groups(profile))


def _build_groups(profile: Profile) -> dict[tuple[int, str], pd.DataFrame]:
    table = profile.get("allocations")
    if table is None or table.empty:
        return {}
    events = profile.events
    ids = events["event_id"].to_numpy()
    rows = pd.Index(ids).get_indexer(table["event_id"].to_numpy())
    ranks = events["rank"].to_numpy(dtype=np.float64, na_value=np.nan)[rows]
    frame = pd.DataFrame(
        {
            "rank": np.nan_to_num(ranks, nan=-1).astype(np.int64),
            "device": table["device"].astype(object).to_numpy(),
            "ts": table["ts_us"].to_numpy(dtype=np.float64),
            "bytes": table["bytes"].to_numpy(dtype=np.float64, na_value=0.0),
            "total": table["total_allocated"].to_numpy(dtype=np.float64, na_value=np.nan),
            "reserved": table["total_reserved"].to_numpy(dtype=np.float64, na_value=np.nan),
            "addr": _addresses(table),
            "op": _operators(profile, rows),
        }
    ).dropna(subset=["device"])
    return {
        (int(rank), str(device)): group.sort_values("ts", kind="stable")
        for (rank, device), group in frame.groupby(["rank", "device"], sort=True)
    }


def _addresses(table: pd.DataFrame) -> np.ndarray:
    """Each event's block address (``Addr``, Kineto 2022+) as a float (exact: addresses stay under 2**53), NaN
    when the trace does not give it (older traces, a table read before the column existed)."""
    if "addr" not in table.columns:
        return np.full(len(table), np.nan)
    return table["addr"].to_numpy(dtype=np.float64, na_value=np.nan)


def _peak(group: pd.DataFrame) -> tuple[str, np.ndarray, int]:
    """The basis, the bytes in use after each event (:func:`in_use`) and the position of the peak (the first of
    equals) of one device's events: the one place the peak is found, for its record and its split."""
    basis, used = in_use(group["bytes"].to_numpy(), group["total"].to_numpy())
    return basis, used, int(np.argmax(used))


def in_use(blocks: np.ndarray, totals: np.ndarray) -> tuple[str, np.ndarray]:
    """The basis and the bytes in use after each allocator event of one device (in time order): the
    allocator's ``totals`` when every event has one (:data:`ALLOCATOR`), else the running sum of the
    ``blocks`` since the trace began (:data:`NET`). The one definition the peak and the figure read."""
    if not np.isnan(totals).any():
        return ALLOCATOR, totals
    return NET, np.cumsum(blocks)


def memory_over_time(profile: Profile) -> dict[tuple[int | None, str], pd.DataFrame]:
    """Per (rank, device), as :func:`device_memory` keys its records (rank None when unknown): the bytes in
    use after each allocator event, in time order. Columns ``at_us`` (from the trace's time origin),
    ``allocated_bytes`` (:func:`in_use`: the allocator's total, or the net of the blocks) and
    ``reserved_bytes`` (NaN when the trace does not give it); ``attrs["basis"]`` says which."""
    groups = _groups(profile)
    origin = (time_origin(profile) or 0.0) if groups else 0.0
    out = {}
    for (rank, device), group in groups.items():
        basis, allocated = in_use(group["bytes"].to_numpy(), group["total"].to_numpy())
        curve = pd.DataFrame(
            {
                "at_us": group["ts"].to_numpy() - origin,
                "allocated_bytes": allocated,
                "reserved_bytes": group["reserved"].to_numpy(),
            }
        )
        curve.attrs["basis"] = basis
        out[(None if rank < 0 else rank, device)] = curve
    return out


def reserved_peaks(profile: Profile) -> dict[tuple[int | None, str], dict]:
    """Per (rank, device), as :func:`device_memory` keys its records, for the devices whose allocator events
    give ``Total Reserved``: ``peak_reserved_bytes`` (the largest), ``allocated_at_peak_bytes`` (the most in
    use, :func:`in_use`, at an event where the reserved stood at that peak) and ``unallocated_at_peak_bytes``,
    their difference: the bytes reserved but not allocated at the peak, which no packing of the blocks live
    then could have returned (docs/figures.md, "Device memory"). Devices without the reserved are left out."""
    out = {}
    for key, curve in memory_over_time(profile).items():
        reserved = curve["reserved_bytes"].to_numpy(dtype=np.float64)
        if np.isnan(reserved).all():
            continue
        peak = float(np.nanmax(reserved))
        allocated = float(curve["allocated_bytes"].to_numpy(dtype=np.float64)[reserved == peak].max())
        out[key] = {
            "peak_reserved_bytes": int(peak),
            "allocated_at_peak_bytes": int(allocated),
            "unallocated_at_peak_bytes": int(max(peak - allocated, 0.0)),
        }
    return out


def _operators(profile: Profile, rows: np.ndarray) -> np.ndarray:
    """The operator each ``[memory]`` row (positions ``rows``) belongs to: its innermost enclosing framework
    operator (Kineto's ``cpu_op``) that is not an allocation primitive (``aten::empty`` under ``aten::addmm`` is
    ``aten::addmm``'s block); without one, the innermost enclosing event (a Python function, an annotation)."""
    events = profile.events
    parent = parent_rows(profile)  # each event's parent as a row position, -1 at the top level
    names = events["name"]
    names = names.array if isinstance(names.dtype, pd.CategoricalDtype) else pd.Categorical(names)
    codes = np.asarray(names.codes, dtype=np.int64)
    labels = np.asarray(names.categories, dtype=object)
    primitive = np.append(np.isin(labels, list(ALLOCATION_PRIMITIVES)), False)  # code -1 (no name): not one
    operator = events["channel"].isin(OPERATOR_CHANNELS).to_numpy(dtype=bool) & ~primitive[codes]
    innermost = parent[rows]
    owner = innermost.copy()
    while True:  # each round one level up: it ends at the top level
        up = (owner >= 0) & ~operator[np.maximum(owner, 0)]
        if not up.any():
            break
        owner[up] = parent[owner[up]]
    owner = np.where(owner >= 0, owner, innermost)
    code = np.where(owner >= 0, codes[np.maximum(owner, 0)], -1)
    return np.where(code >= 0, labels[np.maximum(code, 0)], None)


#: The part of a peak that no allocation in the trace accounts for and no operator frees after it: the blocks
#: allocated before the trace began and still live at the peak (less those of them freed in the trace before it,
#: whose frees no allocation pairs with), except those an operator frees after the peak (:func:`freed_part`), so
#: the blocks still live at the trace's end or freed outside any operator; on a ``basis: "net"`` trace (which
#: starts from 0), minus the bytes of the unpaired frees before the peak.
BEFORE_TRACE = "(before the trace)"
#: How the part of the blocks from before the trace that one operator frees after the peak is named.
FREED_IN = "(before the trace, freed in {op})"
#: An allocation outside any operator or event.
NO_OPERATOR = "(no operator)"


def freed_part(op: str) -> str:
    """The part of a peak held by blocks allocated before the trace and freed after the peak in ``op``."""
    return FREED_IN.format(op=op)


def is_freed_part(part: str) -> bool:
    """Whether ``part`` is a :func:`freed_part` (blocks from before the trace freed after the peak)."""
    head, tail = FREED_IN.split("{op}")
    return part.startswith(head) and part.endswith(tail)


def peak_parts(profile: Profile) -> dict[tuple[int | None, str], dict]:
    """Per (rank, device), as :func:`device_memory` keys its records, each peak allocated split exactly into
    parts that sum to it (docs/figures.md, "Device memory"): the bytes live at the peak by the operator that
    allocated them (:func:`_operators`: the allocation's enclosing operator; :data:`NO_OPERATOR` outside any),
    then, on the allocator's totals, the blocks from before the trace that an operator frees after the peak, by
    that operator (:func:`freed_part`: a free that pairs with no allocation of the trace), and
    :data:`BEFORE_TRACE`, the peak less all those. A free is paired with its allocation by address; without
    addresses (Kineto before about 2022) with the latest live block of its size on the device, so an
    operator's bytes are then those of its size class. Each record: ``basis``, ``peak_bytes`` (the
    record's ``peak_allocated_bytes``, so ``trace.device_memory_peak_bytes`` on the allocator's totals),
    ``peak_at_us``, ``peak_op`` and ``parts`` (part -> bytes: the operators largest first, then the freed
    parts largest first, :data:`BEFORE_TRACE` last; parts with no bytes left out)."""
    return profile.cached("device_memory.peak_parts", lambda: _peak_parts(profile))


def _peak_parts(profile: Profile) -> dict[tuple[int | None, str], dict]:
    records = {(r["rank"], r["device"]): r for r in device_memory(profile)}
    out = {}
    for (rank, device), group in _groups(profile).items():
        key = (None if rank < 0 else rank, device)
        basis, used, peak = _peak(group)
        live, freed = _live_by_operator(group, peak)
        parts = _largest_first(live)
        before = int(used[peak]) - sum(parts.values())
        # the blocks from before the trace an operator frees after the peak were live at it: on the allocator's
        # totals (a net peak leaves them out) and when they fit in what the peak holds from before the trace
        named = _largest_first({freed_part(op): b for op, b in freed.items()}) if basis == ALLOCATOR else {}
        if sum(named.values()) <= before:
            parts.update(named)
            before -= sum(named.values())
        parts[BEFORE_TRACE] = before
        record = records[key]
        out[key] = {
            "basis": record["basis"],
            "peak_bytes": record["peak_allocated_bytes"],
            "peak_at_us": record["peak_at_us"],
            "peak_op": record["peak_op"],
            "parts": parts,
        }
    return out


def _largest_first(parts: dict[str, int]) -> dict[str, int]:
    """``parts`` without those of no bytes, largest first (ties by name)."""
    return dict(sorted(((p, b) for p, b in parts.items() if b), key=lambda kv: (-kv[1], kv[0])))


def _live_by_operator(events: pd.DataFrame, peak: int) -> tuple[dict[str, int], dict[str, int]]:
    """Of one device's ``events`` (in time order) and the position ``peak``: the bytes of the blocks allocated
    up to the peak and not freed by then, by the operator that allocated them; and the bytes of the frees after
    the peak that pair with no allocation of the trace (blocks allocated before it began, so live at the peak),
    by the operator around the free (frees outside any operator left out). A free pairs with the live block of
    its address, else (no address) with the latest live block of its size; a free before the peak that pairs
    with none (a block from before the trace) is counted in neither."""
    by_addr: dict[float, tuple[int, str]] = {}
    by_size: dict[int, list[str]] = {}
    live: dict[str, int] = {}
    freed: dict[str, int] = {}
    for at, (size, addr, op) in enumerate(
        zip(events["bytes"].to_numpy(), events["addr"].to_numpy(), events["op"].to_numpy(), strict=True)
    ):
        size = int(size)
        known = not np.isnan(addr)
        name = NO_OPERATOR if op is None or pd.isna(op) else str(op)
        if size > 0:
            if at <= peak:
                live[name] = live.get(name, 0) + size
            if known:
                by_addr[addr] = (size, name)
            else:
                by_size.setdefault(size, []).append(name)
            continue
        if size == 0:
            continue
        if known:
            block = by_addr.pop(addr, None)
            owner = block[1] if block is not None and block[0] == -size else None
        else:
            stack = by_size.get(-size)
            owner = stack.pop() if stack else None
        if at <= peak:
            if owner is not None:
                live[owner] -= -size
        elif owner is None and name != NO_OPERATOR:
            freed[name] = freed.get(name, 0) + -size
    return live, freed


def _capacities(profile: Profile) -> dict[str, int]:
    """Each GPU's memory (``gpu:N`` -> bytes) from the trace's ``deviceProperties`` (``totalGlobalMem`` of
    device ``id`` N; a directory of ranks: its first rank's, the ranks' devices taken to be alike)."""
    out = {}
    for props in device_properties(profile):
        size, index = props.get("totalGlobalMem"), props.get("id")
        if type(size) is int and size > 0 and type(index) is int:
            out[f"gpu:{index}"] = size
    return out


def _one(rank: int, device: str, group: pd.DataFrame, origin: float, top: int, capacity: int | None) -> dict:
    blocks = group["bytes"].to_numpy()
    basis, used, peak = _peak(group)
    start = float(used[0] - blocks[0]) if basis == ALLOCATOR else 0.0
    reserved = group["reserved"].to_numpy()
    allocated, freed = blocks > 0, blocks < 0
    by_op = (
        group[allocated]
        .assign(op=lambda f: f["op"].fillna("(no operator)"))
        .groupby("op", sort=False)["bytes"]
        .agg(["size", "sum"])
        .sort_values(["sum", "size"], ascending=False, kind="stable")
        .head(top)
    )
    op = group["op"].iloc[peak]
    return {
        "rank": None if rank < 0 else rank,
        "device": device,
        "basis": basis,
        "peak_allocated_bytes": int(used[peak]),
        "peak_at_us": float(group["ts"].iloc[peak] - origin),
        "peak_op": None if op is None or pd.isna(op) else str(op),
        "peak_reserved_bytes": None if np.isnan(reserved).all() else int(np.nanmax(reserved)),
        "capacity_bytes": capacity,
        "allocations": int(allocated.sum()),
        "allocated_bytes": int(blocks[allocated].sum()),
        "frees": int(freed.sum()),
        "freed_bytes": int(-blocks[freed].sum()),
        "start_bytes": int(start),
        "end_bytes": int(used[-1]),
        "top_ops": [
            {"op": str(name), "allocations": int(row["size"]), "allocated_bytes": int(row["sum"])}
            for name, row in by_op.iterrows()
        ],
    }


@metric(
    "trace.device_memory_peak_bytes",
    "bytes",
    "peak device memory allocated: the largest of the accelerators' allocator peaks (Total Allocated of the "
    "PyTorch profiler's [memory] events; profile_memory=True)",
    needs=("allocations",),
)
def device_memory_peak_bytes(profile: Profile) -> float | None:
    """The largest peak allocated of the accelerators (not ``cpu``) on the allocator's own totals; None
    when the trace holds no allocator events or only block sizes (``basis: "net"``, not a peak)."""
    peaks = [
        r["peak_allocated_bytes"]
        for r in device_memory(profile)
        if r["device"] != "cpu" and r["basis"] == ALLOCATOR
    ]
    return float(max(peaks)) if peaks else None
