"""Compare two Profiles: scalar metrics, tiles, IPUs, programs, trace events and liveness.

Everything here reads only the schema tables (and, for a baseline, the metric
values it carries), so any two profiles compare, whatever their readers.
Sections a side cannot fill are listed in :attr:`ProfileDiff.unavailable`
with the reason, never silently empty.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .. import metrics as registry
from ..io import units
from ..io.plural import plural
from ..metrics.limit import run_limit
from ..model.profile import NEEDS_HINT, Profile
from ..trace.activity import STEP_PREFIX, is_bookkeeping, is_device_activity
from .baseline import is_baseline, metric_values
from .basis import Basis, choose, normalise, on_one_step_basis, totals_notes
from .device_memory_parts import device_memory_parts, operators_merged
from .memory_parts import MemoryParts, memory_parts

#: Two times in microseconds closer than this are the same (the nanosecond a baseline's JSON keeps).
TIME_TOLERANCE_US = 10.0**-units.TIME_DECIMALS

#: Default relative tolerance under which a program / event total counts as "unchanged".
DEFAULT_TOLERANCE = 0.01

#: Target fields compared to flag mismatched targets.
TARGET_FIELDS = (
    "ipu_arch",
    "num_ipus",
    "tiles_per_ipu",
    "bytes_per_tile",
    "clock_hz",
    "num_replicas",
    "ipus_per_replica",
)

METRIC_COLUMNS = ["name", "unit", "better", "base", "new", "abs_change", "rel_change", "status", "worse"]
NAMED_COLUMNS = [
    "name",
    "base_count",
    "new_count",
    "base_total",
    "new_total",
    "change",
    "rel_change",
    "status",
]
#: ``events_on`` choices: which events each keeps (an event name's ``where``).
EVENTS_ON = {
    "device": "every event of the name is device work (kernels, copies, memsets)",
    "host": "no event of the name is device work",
}
TILE_COLUMNS = ["tile", "ipu", "tile_in_ipu", "base_bytes", "new_bytes", "change_bytes", "rel_change"]
IPU_COLUMNS = [
    "ipu",
    "base_tiles",
    "new_tiles",
    "base_bytes",
    "new_bytes",
    "change_bytes",
    "base_max_tile_bytes",
    "new_max_tile_bytes",
    "base_tiles_out_of_memory",
    "new_tiles_out_of_memory",
]
LIVENESS_COLUMNS = ["step", "program", "base_bytes", "new_bytes", "change_bytes"]

#: Families whose members are names the run chose (its annotations), not categories a source names: members
#: that do not overlap are different work, not different naming (no note says so), and the text diff does not
#: widen its name column for them.
RUN_NAMED = ("trace.gpu_annotation_us.",)

#: Metric statuses that mean "compared" (as opposed to a side lacking the metric).
COMPARED = ("changed", "unchanged", "added", "removed")


@dataclass
class ProfileDiff:
    """The comparison of two profiles (``base`` -> ``new``).

    ``metrics``: one row per metric of the shared registry (name, unit, better,
    base, new, abs_change, rel_change, status, worse); ``tiles``: per global
    tile index both sides have; ``ipus``: per-IPU aggregates (outer join);
    ``programs`` / ``events``: per name with added/removed/grown/shrunk/unchanged (``events`` also ``where``:
    host, device or both; both, when the profiles say, ``category``: its steps' or device events' category,
    ``mixed`` for several, empty for host work);
    ``liveness``: per liveness step when the program sequences line up.
    ``notes`` explains mismatches; ``unavailable`` maps a section to why it is empty.
    ``basis`` says, per family (``trace``, ``execution``), whether totals or
    per-step (per-run) figures were compared (see :mod:`popprof.compare.basis`).
    """

    base_name: str
    new_name: str
    metrics: pd.DataFrame
    tiles: pd.DataFrame
    ipus: pd.DataFrame
    programs: pd.DataFrame
    events: pd.DataFrame
    liveness: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)
    base_target: dict[str, object] = field(default_factory=dict)
    new_target: dict[str, object] = field(default_factory=dict)
    tolerance: float = DEFAULT_TOLERANCE
    basis: dict[str, Basis] = field(default_factory=dict)
    #: Both sides' tiles split into memory parts (:mod:`popprof.compare.memory_parts`), read by
    #: :func:`popprof.compare.memory_changed.memory_changed`; None when neither side has per-tile categories.
    memory: MemoryParts | None = field(default=None, repr=False, compare=False)
    #: Both sides' accelerator peaks split by allocating operator (``metrics/device_memory.py`` ``peak_parts``),
    #: read by :func:`popprof.compare.device_memory_changed.device_memory_changed`; None without allocator events.
    device_memory: tuple[dict, dict] | None = field(default=None, repr=False, compare=False)
    #: Both sides' run limits (:func:`popprof.metrics.limit.run_limit`: ``limit``, ``share``, ``groups``), read by
    #: :func:`popprof.compare.what_changed.what_changed`; a side without a time account is None.
    limits: tuple[dict | None, dict | None] = field(default=(None, None), repr=False, compare=False)
    #: The latest :func:`popprof.compare.gate.gate` verdict on this diff (None until it is gated).
    gate_result: object | None = field(default=None, repr=False, compare=False)

    def changed_metrics(self, include_unchanged: bool = False) -> pd.DataFrame:
        """Metrics ordered biggest relative change first (compared ones, then one-sided ones)."""
        frame = self.metrics
        if not include_unchanged:
            frame = frame[frame["status"] != "unchanged"]
        order = pd.DataFrame(
            {
                "missing": ~frame["status"].isin(COMPARED),
                "size": -frame["rel_change"].abs().fillna(-1.0),
                "name": frame["name"],
            },
            index=frame.index,
        ).sort_values(["missing", "size", "name"])
        return frame.loc[order.index].reset_index(drop=True)

    def top_tiles(self, n: int = 10) -> pd.DataFrame:
        """The ``n`` tiles whose memory changed most (by absolute change in bytes)."""
        frame = self.tiles[self.tiles["change_bytes"].fillna(0) != 0]
        key = frame["change_bytes"].astype("float64").abs()
        return frame.loc[key.sort_values(ascending=False, kind="stable").index[:n]].reset_index(drop=True)

    def top_named(self, section: str, n: int = 10) -> pd.DataFrame:
        """The ``n`` programs or events (``section``) with the largest absolute change of their total."""
        frame = getattr(self, section)
        frame = frame[frame["status"] != "unchanged"]
        key = frame["change"].astype("float64").abs()
        return frame.loc[key.sort_values(ascending=False, kind="stable").index[:n]].reset_index(drop=True)

    @property
    def has_changes(self) -> bool:
        """True when any metric differs (or exists on one side only)."""
        return bool((self.metrics["status"] != "unchanged").any())

    #: Changed metrics the text repr lists (the rest: :meth:`changed_metrics`).
    REPR_METRICS = 5

    def __repr__(self) -> str:
        """A few lines, as short as the HTML one is to read: the counts, the gate verdict when gated, the
        biggest changes with units, and where the rest is (never the DataFrames)."""
        status = self.metrics["status"]
        changed = self.changed_metrics()
        worse = self.metrics["worse"].fillna(False).astype(bool) & (status != "unchanged")
        counts = [
            f"{plural(len(self.metrics), 'metric')}",
            f"{int((status != 'unchanged').sum()):,} changed",
        ]
        if worse.any():
            counts.append(f"{int(worse.sum()):,} worse")
        for key, words in (("missing_new", "only in base"), ("missing_base", "only in new")):
            if (status == key).any():
                counts.append(f"{int((status == key).sum()):,} {words}")
        verdict = getattr(self.gate_result, "verdict", None)
        head = f"<ProfileDiff {self.base_name!r} -> {self.new_name!r}: {', '.join(counts)}"
        lines = [head + (f"; {verdict}" if verdict else "") + ">"]
        shown = changed.head(self.REPR_METRICS)
        width = max((len(str(n)) for n in shown["name"]), default=0)
        for r in shown.itertuples(index=False):
            change = units.relative(r.rel_change) if r.status in COMPARED else ""
            lines.append(
                f"  {str(r.name):<{width}}  {units.value(r.base, r.unit, missing='—')} -> "
                f"{units.value(r.new, r.unit, missing='—')}  {change}  {_status_word(r.status, r.worse)}".rstrip()
            )
        more = len(changed) - len(shown)
        tail = [f"{plural(more, 'more changed metric')}: .changed_metrics()"] if more > 0 else []
        if self.notes:
            tail.append(f"{plural(len(self.notes), 'note')}: .notes")
        if tail:
            lines.append("  " + "; ".join(tail))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """The diff in Jupyter: the gate verdict when gated, notes, and the changed metrics with units
        (``markup/templates/diff.html.j2``)."""
        from ..markup import render

        rows = [
            (
                r.name,
                units.value(r.base, r.unit, missing="—"),
                units.value(r.new, r.unit, missing="—"),
                units.change(r.abs_change, r.unit),
                units.relative(r.rel_change),
                _status_word(r.status, r.worse),
            )
            for r in self.changed_metrics().itertuples(index=False)
        ]
        return render(
            "diff.html.j2",
            base=self.base_name,
            new=self.new_name,
            verdict=getattr(self.gate_result, "verdict", None),
            passed=getattr(self.gate_result, "passed", True),
            notes=self.notes,
            rows=rows,
        )


def diff(
    base: Profile,
    new: Profile,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    events_on: str | None = None,
) -> ProfileDiff:
    """Compare ``base`` with ``new``; returns a :class:`ProfileDiff`.

    Both sides are Profiles (:func:`popprof.diff` also takes paths and opens them, a baseline JSON too).

    ``tolerance`` is the relative change of a program's or event's total under
    which it counts as unchanged (default 1 %). Metrics are "unchanged" only
    when equal. ``events_on`` (``"device"`` or ``"host"``) keeps the event names of that side only in
    ``events`` (those whose ``where`` it is: HTA's TraceDiff ``device_type`` GPU or CPU); a note says so.
    """
    if events_on not in (None, *EVENTS_ON):
        raise ValueError(f"events_on must be one of {', '.join(EVENTS_ON)} or None, got {events_on!r}")
    if not isinstance(base, Profile) or not isinstance(new, Profile):
        raise TypeError("compare.diff takes two Profiles; popprof.diff opens paths")
    if tolerance < 0 or not math.isfinite(tolerance):
        raise ValueError(f"tolerance must be a finite fraction >= 0, got {tolerance!r}")
    notes: list[str] = []
    unavailable: dict[str, str] = {}
    base_target, new_target = _target(base), _target(new)
    notes.extend(_target_notes(base_target, new_target))
    same_format = base.source_format == new.source_format or is_baseline(base) or is_baseline(new)
    if not same_format:
        notes.append(
            f"a comparison across formats ({base.source_format} -> {new.source_format}): figures one source "
            "cannot fill are 'not in base' / 'not in new', never 0, and figures on different bases are put on "
            "one basis first or not compared"
        )
    ranks_note = _ranks_note(base, new)
    if ranks_note:
        notes.append(ranks_note)
    base, new, step_note = on_one_step_basis(base, new)
    if step_note:
        notes.append(step_note)
    base_values, new_values = metric_values(base), metric_values(new)
    basis = choose(base_values, new_values)
    notes.extend(totals_notes(basis, base_values, new_values))
    metrics_frame = _diff_metrics(
        normalise(base_values, basis, "base"), normalise(new_values, basis, "new"), notes, same_format
    )

    baseline_side = [side for side, p in (("base", base), ("new", new)) if is_baseline(p)]
    if baseline_side:
        reason = (
            f"the {' and '.join(baseline_side)} side is a baseline (metrics only): "
            "per-tile, per-program, per-event and liveness comparisons need full profiles"
        )
        notes.append(reason)

    tiles, ipus = _diff_tiles(base, new, notes, unavailable)
    programs = _diff_named(
        base, new, "steps", program_totals, tolerance, unavailable, "programs", basis.get("execution")
    )
    events = _diff_named(
        base, new, "events", event_totals, tolerance, unavailable, "events", basis.get("trace")
    )
    if events_on is not None and "where" in events.columns:
        events = events[events["where"] == events_on].reset_index(drop=True)
        notes.append(
            f"events: {events_on} work only (events_on={events_on!r}; where: {EVENTS_ON[events_on]})"
        )
    liveness = _diff_liveness(base, new, unavailable)
    memory = memory_parts(base, new)
    device_memory = device_memory_parts(base, new)
    keys_differ = _redaction_keys_note(base, new)
    if keys_differ:
        # pseudonyms made with different keys do not correspond: name-by-name sections would list every
        # name as removed and added, so they are left out and the note says why
        notes.append(keys_differ)
        programs, events, liveness = programs.iloc[0:0], events.iloc[0:0], liveness.iloc[0:0]
        memory = memory.without_variables() if memory is not None else None
        device_memory = operators_merged(device_memory)
        for section in ("programs", "events", "liveness"):
            unavailable[section] = keys_differ
    if baseline_side:
        for section in ("tiles", "ipus", "programs", "events", "liveness"):
            unavailable[section] = reason
    return ProfileDiff(
        base.name,
        new.name,
        metrics_frame,
        tiles,
        ipus,
        programs,
        events,
        liveness,
        notes,
        unavailable,
        base_target,
        new_target,
        tolerance,
        basis,
        memory=memory,
        device_memory=device_memory,
        limits=(run_limit(base), run_limit(new)),
    )


def _rank_count(profile: Profile) -> int | None:
    """Distinct ranks of a trace's events (a rank directory's, a distributed trace's; a trace that names no rank
    is one); None for a profile whose events have no ranks at all (an IPU profile's)."""
    events = profile.get("events")
    if events is None or events.empty or "rank" not in events.columns:
        return None
    return max(int(events["rank"].nunique(dropna=True)), 1)


def _ranks_note(base: Profile, new: Profile) -> str | None:
    """A note when the two traces hold different numbers of ranks: their totals add up over every rank."""
    b, n = _rank_count(base), _rank_count(new)
    if b is None or n is None or b == n:
        return None
    return (
        f"the two sides hold different numbers of ranks (base {b}, new {n}): totals (events, device time, "
        "idle, skew) add up over every rank, so they compare runs of different sizes; compare one rank "
        "with one rank (open a rank's file) for a like-for-like comparison"
    )


def _redaction_keys_note(base: Profile, new: Profile) -> str | None:
    """A note when both sides were redacted with different keys (their key fingerprints differ)."""
    fingerprints = [p.meta.get("redaction_key_fingerprint") for p in (base, new)]
    if all(fingerprints) and fingerprints[0] != fingerprints[1]:
        return (
            f"the profiles were redacted with different keys (fingerprints {fingerprints[0]} and "
            f"{fingerprints[1]}): their pseudonyms do not correspond, so names cannot be matched; "
            "redact both with one key (--key-file) to compare programs and events by name"
        )
    return None


# -- targets ------------------------------------------------------------------


def _target(profile: Profile) -> dict[str, object]:
    out: dict[str, object] = {}
    for key in TARGET_FIELDS:
        value = profile.target_value(key)
        if value is not None:
            out[key] = value.item() if hasattr(value, "item") else value
    return out


def _target_notes(base: dict[str, object], new: dict[str, object]) -> list[str]:
    differing = [
        f"{k} {base[k]} -> {new[k]}" for k in TARGET_FIELDS if k in base and k in new and base[k] != new[k]
    ]
    if not differing:
        return []
    return ["targets differ (" + ", ".join(differing) + "): memory and cycle figures are not like for like"]


# -- metrics ------------------------------------------------------------------


def _diff_metrics(
    b: dict[str, float | None], n: dict[str, float | None], notes: list[str], same_format: bool = True
) -> pd.DataFrame:
    families = _family_members(b, n, notes, same_format)
    rows = []
    for name in sorted(set(b) | set(n)):
        bv, nv = b.get(name), n.get(name)
        fam = families.get(name)
        status = None
        if fam is not None:
            in_b, in_n, comparable = fam
            if comparable and not in_b and nv is not None:
                bv, status = 0.0, "added"
            elif comparable and not in_n and bv is not None:
                nv, status = 0.0, "removed"
        if bv is None and nv is None:
            continue
        m = registry.describe(name)
        better = m.better if m else None
        abs_change = rel_change = worse = None
        if bv is None:
            status = "missing_base"
        elif nv is None:
            status = "missing_new"
        else:
            abs_change = nv - bv
            rel_change = relative(bv, nv)
            if status is None:
                status = "unchanged" if _same(bv, nv, m.unit if m else "") else "changed"
            if status != "unchanged" and better in ("lower", "higher"):
                worse = (abs_change > 0) if better == "lower" else (abs_change < 0)
            elif better in ("lower", "higher"):
                worse = False
        rows.append(
            {
                "name": name,
                "unit": m.unit if m else "",
                "better": better,
                "base": bv,
                "new": nv,
                "abs_change": abs_change,
                "rel_change": rel_change,
                "status": status,
                "worse": worse,
            }
        )
    frame = pd.DataFrame(rows, columns=METRIC_COLUMNS)
    for col in ("base", "new", "abs_change", "rel_change"):
        frame[col] = frame[col].astype("float64")
    frame["worse"] = frame["worse"].astype("boolean")
    return frame


def _family_members(
    b: dict[str, float | None], n: dict[str, float | None], notes: list[str], same_format: bool = True
) -> dict[str, tuple[bool, bool, bool]]:
    """For each family member: (present in base, present in new, family comparable).

    A family lists only the members a profile has (e.g. memory categories with
    bytes), so a member one side lacks is 0 there, provided both sides
    evaluated the family, share at least one member and come from the same format;
    when they share none (sources name categories differently), the members are not
    compared, and across formats a member one side lacks is "not in" that side (its
    source may not record it), never 0.
    """
    out: dict[str, tuple[bool, bool, bool]] = {}
    by_family: dict[str, tuple[set[str], set[str]]] = {}
    printed: set[str] = set()  # families whose members are what the source printed (absent: not in it)
    for name in set(b) | set(n):
        m = registry.describe(name)
        if m is None or not m.family:
            continue
        if not m.absent_is_zero:
            printed.add(m.name)
        sides = by_family.setdefault(m.name, (set(), set()))
        if name in b:
            sides[0].add(name)
        if name in n:
            sides[1].add(name)
    for family, (in_b, in_n) in by_family.items():
        comparable = bool(in_b & in_n) and same_format and family not in printed
        if in_b and in_n and not in_b & in_n and family not in RUN_NAMED:
            notes.append(
                f"{family}* members do not overlap between the profiles (their sources name them "
                "differently): not compared"
            )
        for name in in_b | in_n:
            out[name] = (name in in_b, name in in_n, comparable)
    return out


def _same(a: float, b: float, unit: str = "") -> bool:
    """Whether two values of a metric are the same: equal to 12 digits, or, for a time, within the
    nanosecond JSON keeps (a baseline holds times to the ns, :mod:`popprof.io.jsonout`)."""
    tolerance = TIME_TOLERANCE_US if unit == "us" else 0.0
    return a == b or math.isclose(a, b, rel_tol=1e-12, abs_tol=tolerance)


def relative(base: float, new: float) -> float:
    """The relative change from ``base`` to ``new`` (0 when both are 0; infinite, signed, growth from 0)."""
    if base == 0:
        return 0.0 if new == 0 else math.copysign(math.inf, new)
    return (new - base) / abs(base)


def _lacking(missing: list[str]) -> str:
    """Start of a reason: "the base profile lacks" / "neither profile has"."""
    return "neither profile has" if len(missing) == 2 else f"the {missing[0]} profile lacks"


def _a(word: str) -> str:
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


# -- tiles and IPUs -----------------------------------------------------------


def _diff_tiles(
    base: Profile, new: Profile, notes: list[str], unavailable: dict[str, str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    bt, nt = base.get("tiles"), new.get("tiles")
    empty_tiles = pd.DataFrame({c: pd.Series(dtype="float64") for c in TILE_COLUMNS})
    empty_ipus = pd.DataFrame({c: pd.Series(dtype="float64") for c in IPU_COLUMNS})
    missing = [side for side, t in (("base", bt), ("new", nt)) if t is None or t.empty]
    if missing:
        reason = f"{_lacking(missing)} per-tile memory ({NEEDS_HINT['tiles']})"
        unavailable["tiles"] = unavailable["ipus"] = reason
        return empty_tiles, empty_ipus
    assert bt is not None and nt is not None
    left = bt[["tile", "ipu", "tile_in_ipu", "bytes_incl_gaps"]].rename(
        columns={"bytes_incl_gaps": "base_bytes"}
    )
    right = nt[["tile", "bytes_incl_gaps"]].rename(columns={"bytes_incl_gaps": "new_bytes"})
    tiles = left.merge(right, on="tile", how="inner", sort=True)
    tiles["change_bytes"] = tiles["new_bytes"] - tiles["base_bytes"]
    base_f = tiles["base_bytes"].astype("float64")
    change_f = tiles["change_bytes"].astype("float64")
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(
            base_f.to_numpy() == 0,
            np.where(change_f.to_numpy() == 0, 0.0, np.sign(change_f.to_numpy()) * np.inf),
            change_f.to_numpy() / np.abs(base_f.to_numpy()),
        )
    tiles["rel_change"] = rel
    tiles = tiles[TILE_COLUMNS].reset_index(drop=True)
    if len(bt) != len(nt):
        notes.append(
            f"tile counts differ ({len(bt):,} -> {len(nt):,}): {len(tiles):,} tiles compared by global "
            f"tile index; {len(bt) - len(tiles):,} only in base, {len(nt) - len(tiles):,} only in new; "
            "per-IPU aggregates compare IPUs both have"
        )
    tpi_b, tpi_n = base.target_value("tiles_per_ipu"), new.target_value("tiles_per_ipu")
    if tpi_b is not None and tpi_n is not None and tpi_b != tpi_n:
        notes.append(
            f"tiles per IPU differ ({int(tpi_b):,} -> {int(tpi_n):,}): the same global tile index is not "
            "the same physical tile"
        )
    return tiles, _diff_ipus(base, bt, new, nt)


def _ipu_aggregates(profile: Profile, tiles: pd.DataFrame) -> pd.DataFrame:
    cap = profile.target_value("bytes_per_tile")
    capacity = tiles["capacity_bytes"]
    if cap is not None:
        capacity = capacity.fillna(int(cap))
    over = (tiles["bytes_incl_gaps"] > capacity).fillna(False)
    frame = pd.DataFrame(
        {"ipu": tiles["ipu"], "bytes": tiles["bytes_incl_gaps"], "over": over, "known": capacity.notna()}
    )
    grouped = frame.groupby("ipu", observed=True)
    # without any tile capacity on an IPU its out-of-memory count is unknown (NA), not 0
    oom = grouped["over"].sum().where(grouped["known"].any())
    return pd.DataFrame(
        {
            "tiles": grouped.size(),
            "bytes": grouped["bytes"].sum(),
            "max_tile_bytes": grouped["bytes"].max(),
            "tiles_out_of_memory": oom,
        }
    )


def _diff_ipus(base: Profile, bt: pd.DataFrame, new: Profile, nt: pd.DataFrame) -> pd.DataFrame:
    b = _ipu_aggregates(base, bt).add_prefix("base_")
    n = _ipu_aggregates(new, nt).add_prefix("new_")
    frame = b.join(n, how="outer").reset_index().rename(columns={"index": "ipu"})
    frame["change_bytes"] = frame["new_bytes"] - frame["base_bytes"]
    for col in IPU_COLUMNS[1:]:
        frame[col] = frame[col].astype("Int64")
    return frame[IPU_COLUMNS]


# -- programs and events ------------------------------------------------------


def program_totals(steps: pd.DataFrame, weights: np.ndarray | None = None) -> pd.DataFrame:
    """Per program name: execution steps (distinct global step indices) and IPU-cycles summed over IPUs.

    ``weights``: what each step counts for (None: 1; ``popprof trend``'s means over runs, each step of a run
    its share of the run's mean, with its cycles scaled alike)."""
    codes, names = _codes(steps["program"])
    cycles = steps["cycles"].to_numpy(dtype="float64", na_value=0.0)
    first_row = _first_row_per_step(steps["step"].to_numpy())
    valid = codes >= 0
    rows = np.bincount(codes[valid], minlength=len(names))
    total = np.bincount(codes[valid], weights=cycles[valid], minlength=len(names))
    first_codes = codes[first_row]
    first = first_codes >= 0
    count = np.bincount(
        first_codes[first],
        weights=None if weights is None else weights[first_row][first],
        minlength=len(names),
    )
    present = rows > 0
    category = _categories(codes, steps["category"], len(names)) if "category" in steps.columns else None
    frame = pd.DataFrame(
        {"count": count[present], "total": total[present]},
        index=pd.Index(np.asarray(names, dtype=object)[present], dtype="str"),
    )
    if category is not None:
        frame["category"] = category[present]
    return frame


#: A name's ``category`` when its steps (device events) are of several categories.
MIXED = "mixed"


def _categories(codes: np.ndarray, column: pd.Series, n: int, rows: np.ndarray | None = None) -> np.ndarray:
    """Per name code (``0..n-1``) the category of its rows (of those in the boolean ``rows``, every row when
    None): the one category they share, :data:`MIXED` when several, ``""`` when none has one."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        cat_codes, cats = _codes(column)
    else:  # a missing category stays missing (-1), never the text "nan"
        factorized, cats = pd.factorize(column)
        cat_codes = factorized.astype(np.int64)
    keep = (codes >= 0) & (cat_codes >= 0)
    if rows is not None:
        keep &= rows
    width = len(cats)
    out = np.full(n, "", dtype=object)
    if not width or not n:
        return out
    seen = np.bincount(codes[keep] * width + cat_codes[keep], minlength=n * width).reshape(n, width) > 0
    kinds = seen.sum(axis=1)
    one = kinds == 1
    out[one] = np.asarray(cats, dtype=object)[seen[one].argmax(axis=1)]
    out[kinds > 1] = MIXED
    return out


def _first_row_per_step(step: np.ndarray) -> np.ndarray:
    """Index of one row per distinct global step (a linear scan when steps are sorted, as readers write them)."""
    if len(step) and bool((step[1:] >= step[:-1]).all()):
        return np.flatnonzero(np.concatenate(([True], step[1:] != step[:-1])))
    return np.unique(step, return_index=True)[1]


def _codes(column: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """Integer codes (-1 = missing) and the names they index, without copying categoricals."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.codes.to_numpy(dtype=np.int64), column.cat.categories.astype("str")
    codes, names = pd.factorize(column.astype("str"))
    return codes.astype(np.int64), pd.Index(names, dtype="str")


def event_totals(events: pd.DataFrame, weights: np.ndarray | None = None) -> pd.DataFrame:
    """Per event name: occurrences and summed duration in microseconds (``weights``: how many events each row
    stands for, None: 1; ``popprof trend`` hands rows summed per name and run, scaled for its means).

    The profiler's step annotations (``ProfilerStep#12``) count as one name, ``ProfilerStep#*``: two runs
    number their steps differently, and what compares is the steps' count and time. The profiler's own
    bookkeeping (``PyTorch Profiler (0)``, its recording window, and the like: ``events.bookkeeping``) is left
    out, as HolisticTraceAnalysis's TraceDiff leaves it out: it is no work of the run
    (``trace.recorded_span_us`` compares the recording).
    """
    codes, names = _codes(events["name"])
    codes = np.where(is_bookkeeping(events), -1, codes)
    steps = names.str.startswith(STEP_PREFIX)
    if steps.any():
        names = pd.Index(np.where(steps, STEP_PREFIX + "*", names.to_numpy(dtype=object)), dtype="str")
        codes, names = _merge_codes(codes, names)
    dur = events["dur_us"].to_numpy(dtype="float64", na_value=0.0)
    valid = codes >= 0
    each = None if weights is None else weights[valid]
    count = np.bincount(codes[valid], weights=each, minlength=len(names))
    total = np.bincount(codes[valid], weights=dur[valid], minlength=len(names))
    on_device = (
        is_device_activity(events)
        if "device_category" in events.columns
        else np.zeros(len(events), dtype=bool)
    )
    device_rows = on_device[valid].astype("float64")
    device = np.bincount(
        codes[valid], weights=device_rows if each is None else device_rows * each, minlength=len(names)
    )
    present = count > 0
    frame = pd.DataFrame(
        {"count": count[present], "total": total[present], "device": device[present]},
        index=pd.Index(np.asarray(names, dtype=object)[present], dtype="str"),
    )
    if (
        "device_category" in events.columns
    ):  # the device events' category: which part of the account they fill
        frame["category"] = _categories(codes, events["device_category"], len(names), on_device)[present]
    return frame


def _where(frame: pd.DataFrame) -> pd.Series:
    """Per name (the index): ``device`` when every one of its events, both sides, is device work (kernels,
    copies, memsets: ``trace.activity.is_device_activity``), ``host`` when none is, else ``both``."""
    device = frame["base_device"].fillna(0).to_numpy() + frame["new_device"].fillna(0).to_numpy()
    count = frame["base_count"].fillna(0).to_numpy() + frame["new_count"].fillna(0).to_numpy()
    where = np.select([device <= 0, device >= count], ["host", "device"], default="both")
    return pd.Series(where, index=frame.index, dtype="str")


def _merge_codes(codes: np.ndarray, names: pd.Index) -> tuple[np.ndarray, pd.Index]:
    """Codes re-pointed at unique names when several codes now share one name."""
    unique_codes, unique_names = pd.factorize(names)
    mapped = np.where(codes >= 0, unique_codes[np.maximum(codes, 0)], -1)
    return mapped.astype(np.int64), pd.Index(unique_names, dtype="str")


def _diff_named(
    base: Profile,
    new: Profile,
    table: str,
    totals,
    tolerance: float,
    unavailable: dict[str, str],
    section: str,
    basis: Basis | None = None,
) -> pd.DataFrame:
    bt, nt = base.get(table), new.get(table)
    missing = [side for side, t in (("base", bt), ("new", nt)) if t is None or t.empty]
    if not missing and table == "steps":  # steps without any known cycles: totals unknown, not 0
        missing = [side for side, t in (("base", bt), ("new", nt)) if not t["cycles"].notna().any()]
        reason = f"{_lacking(missing)} step cycles (steps.cycles are all missing)" if missing else ""
    elif missing:
        reason = f"{_lacking(missing)} {_a(table)} table ({NEEDS_HINT.get(table, '')})"
    if missing:
        unavailable[section] = reason
        return pd.DataFrame(
            {c: pd.Series(dtype="str" if c in ("name", "status") else "float64") for c in NAMED_COLUMNS}
        )
    return compare_named(
        totals(bt),
        totals(nt),
        tolerance,
        (None, None) if basis is None else (basis.divisor("base"), basis.divisor("new")),
    )


def compare_named(
    base: pd.DataFrame,
    new: pd.DataFrame,
    tolerance: float,
    divisors: tuple[int | None, int | None] = (None, None),
) -> pd.DataFrame:
    """The programs or events section of a diff from the two sides' totals per name (:func:`program_totals`,
    :func:`event_totals`: ``count``, ``total``, events also ``device``, and ``category``), each side's counts
    and totals divided by its divisor when not None (per step or run): :func:`classify_named`'s columns, then
    ``where`` (events) and ``category`` (:func:`_category`). ``popprof diff`` and ``popprof trend`` (the means
    of the runs either side of a change) both make theirs here."""
    category = _category(*(t["category"] if "category" in t.columns else None for t in (base, new)))
    b_totals, n_totals = (t.drop(columns="category", errors="ignore") for t in (base, new))
    b = _divided(b_totals, divisors[0]).add_prefix("base_")
    n = _divided(n_totals, divisors[1]).add_prefix("new_")
    b.index = b.index.astype("str")
    n.index = n.index.astype("str")
    frame = b.join(n, how="outer")
    frame.index.name = "name"
    where = _where(frame) if "base_device" in frame.columns else None
    out = classify_named(frame.reset_index(), tolerance)
    if where is not None:  # events: host or device work, HTA's CPU / GPU split of its TraceDiff
        out["where"] = out["name"].map(where).astype("str")
    if category is not None:  # the step (device event) category, which "What changed" reads
        out["category"] = out["name"].map(category).fillna("").astype("str")
    return out


def _category(base: pd.Series | None, new: pd.Series | None) -> pd.Series | None:
    """Per name the category of its steps or device events on both sides: the one they share, :data:`MIXED`
    when the sides differ, the one side's when the other has none; None when neither side says."""
    if base is None or new is None:
        return None if base is None and new is None else (base if new is None else new).astype("str")
    both = pd.concat([base.rename("base"), new.rename("new")], axis=1).fillna("")
    b, n = both["base"].astype("str"), both["new"].astype("str")
    out = np.where(b == n, b, np.where(b == "", n, np.where(n == "", b, MIXED)))
    return pd.Series(out, index=both.index.astype("str"), dtype="str")


def _divided(frame: pd.DataFrame, divisor: int | None) -> pd.DataFrame:
    """Counts and totals divided by the side's steps (runs) when the basis is per step, else as they are."""
    return frame if divisor is None else frame.astype("float64") / divisor


def classify_named(frame: pd.DataFrame, tolerance: float) -> pd.DataFrame:
    """Add change, rel_change and status to a frame with base/new count and total columns.

    Status: ``added`` / ``removed`` when one side lacks the name; otherwise
    ``grown`` / ``shrunk`` when the total moved by more than ``tolerance``
    (relative to the base total), else by the count when it moved; else ``unchanged``.
    """
    bc, nc = frame["base_count"].to_numpy("float64"), frame["new_count"].to_numpy("float64")
    btot, ntot = frame["base_total"].to_numpy("float64"), frame["new_total"].to_numpy("float64")
    added, removed = np.isnan(bc), np.isnan(nc)
    change = np.where(added, ntot, np.where(removed, -btot, ntot - btot))
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(btot == 0, np.where(change == 0, 0.0, np.sign(change) * np.inf), change / np.abs(btot))
    rel = np.where(added | removed, np.nan, rel)
    beyond = np.abs(change) > tolerance * np.abs(np.nan_to_num(btot)) + 1e-12
    status = np.select(
        [added, removed, beyond & (change > 0), beyond & (change < 0), nc > bc, nc < bc],
        ["added", "removed", "grown", "shrunk", "grown", "shrunk"],
        default="unchanged",
    )
    frame = frame.assign(change=change, rel_change=rel, status=status)
    frame["name"] = frame["name"].astype("str")
    frame["status"] = frame["status"].astype("str")
    return frame[NAMED_COLUMNS].sort_values("name", kind="stable").reset_index(drop=True)


# -- liveness -----------------------------------------------------------------


def _diff_liveness(base: Profile, new: Profile, unavailable: dict[str, str]) -> pd.DataFrame:
    bl, nl = base.get("liveness"), new.get("liveness")
    empty = pd.DataFrame({c: pd.Series(dtype="float64") for c in LIVENESS_COLUMNS})
    missing = [side for side, t in (("base", bl), ("new", nl)) if t is None or t.empty]
    if missing:
        unavailable["liveness"] = f"{_lacking(missing)} a liveness table ({NEEDS_HINT['liveness']})"
        return empty
    assert bl is not None and nl is not None
    bl, nl = bl.sort_values("step"), nl.sort_values("step")
    bp, np_ = bl["program"].astype("str").to_numpy(), nl["program"].astype("str").to_numpy()
    if len(bp) != len(np_):
        unavailable["liveness"] = (
            f"liveness steps do not line up: {len(bp):,} steps in base, {len(np_):,} in "
            "new (different program sequences)"
        )
        return empty
    differs = np.flatnonzero(bp != np_)
    if len(differs):
        unavailable["liveness"] = (
            f"liveness steps do not line up: the program sequences differ at "
            f"{len(differs):,} of {len(bp):,} steps (first at step "
            f"{int(bl['step'].iloc[differs[0]])})"
        )
        return empty
    frame = pd.DataFrame(
        {
            "step": bl["step"].to_numpy(),
            "program": bp,
            "base_bytes": bl["not_always_live_bytes"].to_numpy(),
            "new_bytes": nl["not_always_live_bytes"].to_numpy(),
        }
    )
    frame["change_bytes"] = frame["new_bytes"] - frame["base_bytes"]
    return frame


def _status_word(status: str, worse: object) -> str:
    """A metric row's status in words: ``worse`` / ``better``, ``only in base`` / ``only in new``, ..."""
    if status == "missing_base":
        return "not in base"
    if status == "missing_new":
        return "not in new"
    known = worse is not None and not pd.isna(worse)
    if known and bool(worse):
        return f"{status} worse" if status in ("added", "removed") else "worse"
    if known and status != "unchanged":
        return f"{status} better" if status in ("added", "removed") else "better"
    return "" if status == "changed" else status
