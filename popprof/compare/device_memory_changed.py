"""What changed in device memory: the change of a GPU trace's allocator peak split into its operators' changes.

Each side's peak allocated on one (rank, device) is split exactly into parts that sum to it
(:func:`popprof.metrics.device_memory.peak_parts`: the bytes live at the peak by the operator that allocated
them, and those from before the trace), so the change of the peak is exactly the sum of the parts' changes,
split by :func:`~.memory_changed.decompose_bytes` (the noise rule of "What changed in memory": a change under
both 1 KiB and 1 % of the base peak is noise). :func:`~.device_memory_parts.device_memory_parts` is called
by :func:`popprof.compare.core.diff` while it has both profiles; :func:`device_memory_changed` reads the
:class:`~popprof.compare.core.ProfileDiff`: the device whose peak changed most, then every other device both sides
have whose peak moved (``devices``). ``popprof diff`` prints it after the memory block (text,
Markdown, HTML) and the JSON holds it under ``device_memory_changed`` (``docs/diff.md``, "What changed:
device memory").
"""

from __future__ import annotations

from ..metrics.device_memory import BEFORE_TRACE, NET, is_freed_part
from .core import ProfileDiff
from .device_memory_parts import Peaks
from .memory_changed import decompose_bytes

#: The part kinds: bytes an operator allocated, or blocks from before the trace (freed after the peak by an
#: operator, or the rest).
OPERATOR, BEFORE = "operator", "before the trace"
#: What :data:`~popprof.metrics.device_memory.BEFORE_TRACE` is, in words.
BEFORE_WORDS = "before the trace (or unpaired frees)"
#: At most this many devices are explained each in its own block; the others are counted in one line.
MAX_DEVICES = 4


def _pair(base: Peaks, new: Peaks) -> tuple[tuple, tuple, str]:
    """The (rank, device) of each side compared: of the keys both have, the one whose peak changed most (the
    first of equals); without a shared key, each side's highest peak."""
    shared = [k for k in base if k in new]
    if shared:
        key = max(shared, key=lambda k: abs(new[k]["peak_bytes"] - base[k]["peak_bytes"]))
        return key, key, "the device whose peak changed most"
    highest = [max(side, key=lambda k: side[k]["peak_bytes"]) for side in (base, new)]
    return highest[0], highest[1], "each side's highest peak (no device on both)"


def _where(key: tuple, record: dict) -> dict:
    rank, device = key
    return {
        "rank": rank,
        "device": device,
        "basis": record["basis"],
        "peak_bytes": record["peak_bytes"],
        "peak_at_us": record["peak_at_us"],
        "peak_op": record["peak_op"],
    }


def _words(part: str) -> str:
    """A part as the text prints it: an operator's name, or what the bytes from before the trace are."""
    if part == BEFORE_TRACE:
        return BEFORE_WORDS
    return part[1:-1] if is_freed_part(part) else part


def _device(b_key: tuple, b: dict, n_key: tuple, n: dict) -> dict:
    """One device's block: where each side's peak is (``base``, ``new``), ``covers`` and the decomposition."""
    names = list(dict.fromkeys([*b["parts"], *n["parts"]]))
    words = {p: _words(p) for p in names}
    kinds = {p: BEFORE if p == BEFORE_TRACE or is_freed_part(p) else OPERATOR for p in names}
    net = [side for side, r in (("base", b), ("new", n)) if r["basis"] == NET]
    covers = (
        f"the {' and '.join(net)} peak is the net of the blocks allocated and freed since the trace began "
        "(no allocator totals): blocks allocated before it are not counted"
        if net
        else None
    )
    return {
        "base": _where(b_key, b),
        "new": _where(n_key, n),
        "covers": covers,
        **decompose_bytes(b["parts"], n["parts"], words, kinds),
    }


def device_memory_changed(result: ProfileDiff) -> dict | None:
    """The device memory headline of ``result`` (a :class:`~popprof.compare.core.ProfileDiff`); None when
    neither side has allocator events on an accelerator. Else ``available`` (False with a ``reason`` when one
    side has none), ``chosen`` (how the device was chosen), ``base`` / ``new`` (``rank``, ``device``,
    ``basis``, ``peak_bytes``, ``peak_at_us``, ``peak_op``), ``covers`` (what the sum covers: null on the
    allocator's totals, a sentence when a side is ``basis: "net"``) and the decomposition of the peak
    (:func:`~.memory_changed.decompose_bytes`: ``total``, ``noise_bytes``, ``total_moved``, ``material``,
    ``parts`` (``part`` an operator, a part from before the trace, ...; ``kind``, ``words``, ...),
    ``rest_bytes``); then ``devices``: that device's block (``base``, ``new``, ``covers`` and the
    decomposition) and every other device both sides have whose peak moved by its noise floor or more, largest
    change first (the first of equals in the devices' order)."""
    sides = result.device_memory
    if sides is None:
        return None
    base, new = sides
    if not base or not new:
        side = "base" if not base else "new"
        return {
            "available": False,
            "reason": f"the {side} side has no allocator events on a GPU (profile_memory=True)",
        }
    b_key, n_key, chosen = _pair(base, new)
    first = _device(b_key, base[b_key], n_key, new[n_key])
    others = [_device(k, base[k], k, new[k]) for k in base if k in new and k != b_key]
    moved = sorted((d for d in others if d["total_moved"]), key=lambda d: -abs(d["total"]["change_bytes"]))
    return {"available": True, "chosen": chosen, **first, "devices": [first, *moved]}
