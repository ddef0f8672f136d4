"""What changed: the diff's time account rows read as one headline, where the change of the run's time went.

The time account (:mod:`popprof.metrics.account`) partitions each device's window into exclusive parts that
sum to it, so the change of the window (``account.window_us``, summed over devices) is exactly the sum of the
changes of its parts (``account.<part>_us``). :func:`what_changed` reads those rows of a
:class:`~popprof.compare.core.ProfileDiff`, never the profiles: the window's change, the parts that moved
most with their share of that change (signed: a part that moved against the window offsets it), and the
rows of the diff's events (GPU: device work) or programs (IPU) that changed most in the direction of the
busy part that moved most. ``popprof diff`` prints it first (text, Markdown) and the JSON holds it under
``what_changed`` (``docs/diff.md``, "What changed").
"""

from __future__ import annotations

import math

import pandas as pd

from ..metrics.account import BUSY_PARTS, CATEGORY_PARTS, GPU_PARTS, IPU_PARTS, PART_WORDS, PARTS
from .basis import ACCOUNT_PREFIX, account_family
from .core import COMPARED, MIXED, ProfileDiff, relative

#: A change under both of these is noise: no material change (1 us absolute, 1 % of the base window).
NOISE_US = 1.0
NOISE_SHARE = 0.01
#: Parts the text names one by one (the JSON lists every part that moved).
TOP_PARTS = 3
#: Rows of the events (programs) section named as the largest contributors.
TOP_CONTRIBUTORS = 3

WINDOW = "account.window_us"


def _metric(name: str) -> str:
    return f"account.{name}_us"


def noise_floor(window_us: float) -> float:
    """The largest change that is still noise for a base window of ``window_us``: a change is material when it
    reaches 1 us or 1 % of the window, whichever is smaller."""
    return min(NOISE_US, NOISE_SHARE * abs(window_us)) if window_us else NOISE_US


def _float(value: object) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def _finite(value: object) -> float | None:
    """A relative change JSON can hold: null when unknown or infinite (growth from 0)."""
    number = _float(value)
    return number if number is not None and math.isfinite(number) else None


def part_changes(
    values: list[tuple[str, dict, float, float]],
    floor: float,
    total_change: float,
    total_moved: bool,
    unit: str,
    zero: float = 0.0,
) -> tuple[list[dict], float]:
    """The parts of a total that moved beyond ``floor`` and the summed change of the others (from ``zero``), for
    the time account (:func:`decompose`) and memory (:func:`~.memory_changed.decompose_bytes`) alike. ``values``:
    per part, in order, its name, its own fields (``words``, ...), its base and new value. Each part that moved:
    ``part``, its fields, ``base_<unit>``, ``new_<unit>``, ``change_<unit>``, ``share_of_change`` (its change over
    the total's, null when the total did not move beyond the floor: ``total_moved``) and ``offsetting`` (it moved
    against the total)."""
    parts, rest = [], zero
    for part, fields, b, n in values:
        change = n - b
        if abs(change) < floor:
            rest += change
            continue
        parts.append(
            {
                "part": part,
                **fields,
                f"base_{unit}": b,
                f"new_{unit}": n,
                f"change_{unit}": change,
                "share_of_change": change / total_change if total_moved else None,
                "offsetting": bool(total_moved and change * total_change < 0),
            }
        )
    return parts, rest


def decompose(base: dict[str, float | None], new: dict[str, float | None]) -> dict:
    """The window's change split into its parts' changes, from two sides' account values (``account.window_us``
    and ``account.<part>_us``, on one basis; a part absent from both is left out, one absent from a side is 0
    there): ``platform`` (``gpu`` / ``ipu``: :func:`~.basis.account_family`), ``window`` (``base_us``,
    ``new_us``, ``change_us``, ``rel_change``), ``noise_us`` (:func:`noise_floor` of the base window),
    ``window_moved`` (the window's change is beyond it), ``material`` (False: nothing moved beyond it),
    ``parts`` (each part that moved beyond the floor, largest change first: ``part``, ``words``, ``base_us``,
    ``new_us``, ``change_us``, ``share_of_change``: its change over the window's, null when the window did not
    move beyond the floor, ``offsetting``: it moved against the window) and ``rest_us`` (the summed change of
    the parts within the floor, so that ``parts`` and it add up to the window's change). Pure: ``popprof diff``
    (:func:`what_changed`) and ``popprof trend`` (a change point's segments) both read it."""
    base_w, new_w = float(base[WINDOW]), float(new[WINDOW])
    change_w = new_w - base_w
    floor = noise_floor(base_w)
    platform = "ipu" if "execution" in (account_family(base), account_family(new)) else "gpu"
    names = IPU_PARTS if platform == "ipu" else GPU_PARTS
    window_moved = abs(change_w) >= floor
    values = [
        (
            part,
            {"words": PART_WORDS[part]},
            float(base.get(_metric(part)) or 0.0),
            float(new.get(_metric(part)) or 0.0),
        )
        for part in names
        if base.get(_metric(part)) is not None or new.get(_metric(part)) is not None
    ]
    parts, rest = part_changes(values, floor, change_w, window_moved, "us", 0.0)
    parts.sort(key=lambda p: (-abs(p["change_us"]), PARTS.index(p["part"])))
    return {
        "platform": platform,
        "window": {
            "base_us": base_w,
            "new_us": new_w,
            "change_us": change_w,
            "rel_change": _finite(relative(base_w, new_w)),
        },
        "noise_us": floor,
        "window_moved": window_moved,
        "material": bool(window_moved or parts),
        "parts": parts,
        "rest_us": rest,
    }


def what_changed(result: ProfileDiff) -> dict:
    """The headline of ``result``: ``available`` (False with a ``reason`` when the account is not on both
    sides), the decomposition of the diff's account rows (:func:`decompose`: ``platform``, ``window``,
    ``noise_us``, ``window_moved``, ``material``, ``parts``, ``rest_us``), ``basis``
    (``total``, or ``per profiler step`` / ``per run`` when its platform's figures, trace or execution, are
    compared per step or run: the account's rows are then per step or run, :func:`~.basis.normalise`) and
    ``contributors`` (``part``, ``section``, ``unit``,
    ``rows``: ``name``, ``change``, ``status``; ``unavailable`` true, no rows, when the section is not compared, as
    against a baseline; null when no busy part moved)."""
    rows = result.metrics.set_index("name")
    missing = _missing(rows)
    if missing:
        return {"available": False, "reason": missing}
    account = rows[rows.index.str.startswith(ACCOUNT_PREFIX)]
    doc = decompose(
        {n: _float(v) for n, v in account["base"].items()}, {n: _float(v) for n, v in account["new"].items()}
    )
    basis = result.basis.get("execution" if doc["platform"] == "ipu" else "trace")
    per = basis.per if basis is not None else None  # the account's rows follow their platform's basis
    return {
        "available": True,
        "platform": doc["platform"],
        "basis": "total" if per is None else f"per {per}",
        **{k: v for k, v in doc.items() if k != "platform"},
        "contributors": _contributors(result, doc["parts"], doc["platform"]),
        "limit": limit_change(*result.limits),
    }


def limit_change(base: dict | None, new: dict | None) -> dict | None:
    """The run's limit on both sides (``docs/figures.md``, "What limits the run"): ``base`` and ``new``, each
    ``{"limit", "share"}``, and ``changed`` (the limit is another); None unless both sides have one."""
    if base is None or new is None:
        return None
    return {
        "base": {"limit": base["limit"], "share": base["share"]},
        "new": {"limit": new["limit"], "share": new["share"]},
        "changed": base["limit"] != new["limit"],
    }


def _missing(rows: pd.DataFrame) -> str | None:
    """Why the account cannot explain the change (None: it can)."""
    if WINDOW not in rows.index:
        return "the time account is in neither profile"
    status = rows.loc[WINDOW, "status"]
    if status not in COMPARED:
        side = "base" if status == "missing_base" else "new"
        return f"the time account is not in the {side} profile"
    account = [n for n in rows.index if n.startswith("account.") and n != WINDOW]
    one_sided = [n for n in account if rows.loc[n, "status"] not in COMPARED]
    if one_sided:
        names = sorted(one_sided)
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        return f"the time account's parts are not on both sides ({', '.join(names[:3])}{more})"
    return None


def categories_of(part: str, platform: str) -> tuple[list[str], bool]:
    """The categories whose rows fill ``part`` (:func:`_part_of`, the inverse): the known ones, and whether a
    category the platform's map does not know fills it too (an IPU's ``other``). A reader may keep only the
    names with a row of these (and every row of those names): no other name can be among
    :func:`top_contributors` of the part."""
    parts = CATEGORY_PARTS[platform]
    return sorted(c for c, p in parts.items() if p == part), platform == "ipu" and part == "other"


def _part_of(category: str, platform: str) -> str | None:
    """The account's part a row's ``category`` fills (None: several categories, or none)."""
    if not category or category == MIXED:
        return None
    parts = CATEGORY_PARTS[platform]
    return parts.get(category, "other" if platform == "ipu" else None)


#: Per platform, the section of the diff whose rows fill the account's busy parts and its unit: programs in
#: IPU-cycles, events (device work) in microseconds.
NAMED_SECTIONS: dict[str, tuple[str, str]] = {"ipu": ("programs", "cycles"), "gpu": ("events", "us")}


def busy_part(parts: list[dict]) -> dict | None:
    """The busy part (:data:`~popprof.metrics.account.BUSY_PARTS`) that moved most among a decomposition's
    ``parts`` (:func:`decompose`, largest change first); None when no busy part moved beyond noise."""
    return next((p for p in parts if p["part"] in BUSY_PARTS), None)


def top_contributors(frame: pd.DataFrame, part: dict, platform: str) -> list[dict]:
    """The rows of a programs or events section (:func:`~.core.compare_named`'s columns) that fill ``part``
    (their ``category``: :data:`popprof.metrics.account.CATEGORY_PARTS`; GPU: device work only) and changed
    most in its direction: up to :data:`TOP_CONTRIBUTORS` of ``name``, ``change``, ``status``. The one
    definition of the names under a part's change: ``popprof diff`` (two profiles) and ``popprof trend`` (the
    means of the runs either side of a change) both call it."""
    if platform == "gpu" and "where" in frame.columns:
        frame = frame[frame["where"] == "device"]
    if (
        "category" in frame.columns
    ):  # the rows whose work fills this part (a name of several categories: none)
        parts = frame["category"].map(lambda c: _part_of(c, platform))
        frame = frame[parts == part["part"]]
    change = frame["change"].astype("float64")
    same_way = frame[(frame["status"] != "unchanged") & (change * part["change_us"] > 0)]
    top = same_way.loc[
        same_way["change"].astype("float64").abs().sort_values(ascending=False, kind="stable").index
    ]
    return [
        {"name": str(r.name), "change": float(r.change), "status": str(r.status)}
        for r in top.head(TOP_CONTRIBUTORS).itertuples(index=False)
    ]


def _contributors(result: ProfileDiff, parts: list[dict], platform: str) -> dict | None:
    """The events (GPU: device work) or programs (IPU) of the busy part that moved most among ``parts``
    (:func:`busy_part`) that changed most in its direction (:func:`top_contributors`); None when no busy part
    moved."""
    part = busy_part(parts)
    if part is None:
        return None
    section, unit = NAMED_SECTIONS[platform]
    if section in result.unavailable:
        return {"part": part["part"], "section": section, "unit": unit, "rows": [], "unavailable": True}
    return {
        "part": part["part"],
        "section": section,
        "unit": unit,
        "unavailable": False,
        "rows": top_contributors(getattr(result, section), part, platform),
    }
