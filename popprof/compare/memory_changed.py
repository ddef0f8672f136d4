"""What changed in memory: the change of the memory of all tiles (including gaps) split into its parts' changes.

The parts (:mod:`popprof.compare.memory_parts`: the ``tile_memory`` categories, the always-live and
not-always-live variables, gaps) partition each tile's bytes including gaps, so the change of the total
(``memory.total_incl_gaps_bytes``) is exactly the sum of the parts' changes. :func:`memory_changed` reads a
:class:`~popprof.compare.core.ProfileDiff`: the total's change, the parts that moved most with their signed share
of it, the fullest tile's change split the same way (base's fullest tile against new's, which may be another
tile) and the variables that grew or appeared most (shrank or went, when the total shrank). ``popprof diff``
prints it after the time block (text, Markdown) and the JSON holds it under ``memory_changed``
(``docs/diff.md``, "What changed: memory").
"""

from __future__ import annotations

import math

import pandas as pd

from .core import ProfileDiff, relative
from .memory_parts import MemoryParts
from .what_changed import part_changes

#: A change under both of these is noise: 1 KiB, or 1 % of the base bytes (of all tiles, or of the fullest tile).
NOISE_BYTES = 1024.0
NOISE_SHARE = 0.01
#: Variables named as those that changed most in the total's direction.
TOP_VARIABLES = 3


def noise_floor(base_bytes: float) -> float:
    """The largest change that is still noise for ``base_bytes``: a change is material when it reaches 1 KiB or
    1 % of the base, whichever is smaller."""
    return min(NOISE_BYTES, NOISE_SHARE * abs(base_bytes)) if base_bytes else NOISE_BYTES


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def decompose_bytes(
    base: dict[str, int], new: dict[str, int], words: dict[str, str], kinds: dict[str, str]
) -> dict:
    """The change of a sum of parts (``base`` / ``new``: bytes by part, in the parts' order; a part absent from a
    side is 0 there) split into the parts' changes: ``total`` (``base_bytes``, ``new_bytes``, ``change_bytes``,
    ``rel_change``), ``noise_bytes`` (:func:`noise_floor` of the base), ``total_moved``, ``material`` (a part or
    the total moved beyond the floor), ``parts`` (each that moved beyond it, largest change first: ``part``,
    ``kind``, ``words``, ``base_bytes``, ``new_bytes``, ``change_bytes``, ``share_of_change`` (null when the total
    did not move beyond the floor), ``offsetting``) and ``rest_bytes`` (the summed change of the parts within the
    floor: ``parts`` and it add up to the total's change exactly, the bytes being integers)."""
    names = list(dict.fromkeys([*base, *new]))
    b_total, n_total = sum(int(base.get(p, 0)) for p in names), sum(int(new.get(p, 0)) for p in names)
    change_total = n_total - b_total
    floor = noise_floor(b_total)
    moved = abs(change_total) >= floor
    values = [
        (part, {"kind": kinds[part], "words": words[part]}, int(base.get(part, 0)), int(new.get(part, 0)))
        for part in names
    ]
    parts, rest = part_changes(values, floor, change_total, moved, "bytes", 0)
    # largest change first, the parts' own order among equals (sort is stable)
    parts.sort(key=lambda p: -abs(p["change_bytes"]))
    return {
        "total": {
            "base_bytes": b_total,
            "new_bytes": n_total,
            "change_bytes": change_total,
            "rel_change": _finite(relative(b_total, n_total)),
        },
        "noise_bytes": floor,
        "total_moved": moved,
        "material": bool(moved or parts),
        "parts": parts,
        "rest_bytes": rest,
    }


def memory_changed(result: ProfileDiff) -> dict | None:
    """The memory headline of ``result``; None when neither side has per-tile memory by category (nothing to
    say). Else ``available`` (False with a ``reason`` when one side lacks it), the decomposition of the total of
    all tiles (:func:`decompose_bytes`: ``total``, ``noise_bytes``, ``total_moved``, ``material``, ``parts``,
    ``rest_bytes``), ``fullest_tile`` (``base`` / ``new``: ``tile``, ``ipu``, ``bytes`` of each side's fullest tile
    including gaps; ``moved``: they are different tiles; and the decomposition of new's fullest tile against
    base's) and ``variables`` (null when a side has none: ``direction`` ``grew`` or ``shrank``, ``changed``: how
    many names changed, ``rows``: ``name``, ``base_bytes``, ``new_bytes``, ``change_bytes``, ``status``
    (``added``, ``removed``, ``grown``, ``shrunk``), ``always_live``)."""
    split: MemoryParts | None = result.memory
    if split is None:
        return None
    if split.reason is not None:
        return {"available": False, "reason": split.reason}
    words = {p: split.words(p) for p in split.parts}
    columns = list(split.parts)
    whole = decompose_bytes(
        {p: int(v) for p, v in split.base[columns].sum().items()},
        {p: int(v) for p, v in split.new[columns].sum().items()},
        words,
        split.kinds,
    )
    return {
        "available": True,
        **whole,
        "fullest_tile": _fullest(split, words),
        "variables": _variables(split, whole["total"]["change_bytes"]),
    }


def _fullest_row(frame: pd.DataFrame, columns: list[str]) -> tuple[int, pd.Series]:
    """The fullest tile (including gaps; the first of equals) and its row."""
    totals = frame[columns].sum(axis=1)
    tile = int(totals.idxmax())
    return tile, frame.loc[tile]


def _fullest(split: MemoryParts, words: dict[str, str]) -> dict | None:
    """New's fullest tile against base's, split into the parts (None without tiles)."""
    columns = list(split.parts)
    if split.base.empty or split.new.empty:
        return None
    (b_tile, b_row), (n_tile, n_row) = _fullest_row(split.base, columns), _fullest_row(split.new, columns)
    doc = decompose_bytes(
        {p: int(b_row[p]) for p in columns}, {p: int(n_row[p]) for p in columns}, words, split.kinds
    )
    return {
        "base": {"tile": b_tile, "ipu": int(b_row["ipu"]), "bytes": doc["total"]["base_bytes"]},
        "new": {"tile": n_tile, "ipu": int(n_row["ipu"]), "bytes": doc["total"]["new_bytes"]},
        "moved": b_tile != n_tile,
        **doc,
    }


def _variables(split: MemoryParts, change: int) -> dict | None:
    """The variables that changed most in the direction of the total's change (grew when it did not shrink)."""
    base, new = split.base_variables, split.new_variables
    if base is None or new is None:
        return None
    both = base.add_suffix("_base").join(new.add_suffix("_new"), how="outer")
    b, n = both["bytes_base"].fillna(0.0), both["bytes_new"].fillna(0.0)
    delta = n - b
    status = pd.Series("grown", index=both.index).where(delta > 0, "shrunk")
    status = status.where(both["bytes_base"].notna(), "added").where(both["bytes_new"].notna(), "removed")
    sign = -1 if change < 0 else 1
    way = delta[delta * sign > 0]
    top = way.loc[(way * sign).sort_values(ascending=False, kind="stable").index[:TOP_VARIABLES]]
    always = both["always_live_new"].fillna(both["always_live_base"]).fillna(False).astype(bool)
    return {
        "direction": "shrank" if sign < 0 else "grew",
        "changed": int((delta != 0).sum()),
        "rows": [
            {
                "name": str(name),
                "base_bytes": int(b[name]),
                "new_bytes": int(n[name]),
                "change_bytes": int(delta[name]),
                "status": str(status[name]),
                "always_live": bool(always[name]),
            }
            for name in top.index
        ],
    }
