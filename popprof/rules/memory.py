"""Memory rules: tiles over capacity, headroom, tile imbalance, the liveness peak, gaps.

Figures come from :mod:`popprof.metrics.memory` (the same numbers ``summary``
and ``diff`` show); the rules add thresholds, locations and evidence.
"""

from __future__ import annotations

import pandas as pd

from ..io import units
from ..io.plural import plural
from ..metrics import memory as mm
from ..metrics.tile_parts import tile_gaps
from ..model.profile import Profile
from .base import Finding, Gain, NotEvaluated, RuleContext, band, rule, tile_whole

#: At most this many tiles are listed in a finding's ``where["tiles"]`` (the evidence has all).
MAX_WHERE_TILES = 20


def _tiles_used(profile: Profile) -> pd.DataFrame | None:
    """The tiles table with per-tile capacity filled from the target, or None without per-tile memory."""
    tiles = profile.get("tiles")
    if tiles is None or tiles.empty or not tiles["bytes_incl_gaps"].notna().any():
        return None
    cap = mm.capacity_bytes(profile)
    capacity = tiles["capacity_bytes"].astype("float64")
    if cap is not None:
        capacity = capacity.fillna(cap)
    return pd.DataFrame(
        {
            "tile": tiles["tile"],
            "ipu": tiles["ipu"],
            "tile_in_ipu": tiles["tile_in_ipu"],
            "bytes_incl_gaps": tiles["bytes_incl_gaps"].astype("float64"),
            "bytes_excl_gaps": tiles["bytes_excl_gaps"].astype("float64"),
            "capacity_bytes": capacity,
        }
    )


def _tile_gain(freed: float, used: float, capacity: float, basis: str, tile: str) -> Gain:
    """A memory gain on one tile (``tile`` names it: ``tile 289``): ``freed`` bytes (at most the bytes on it),
    of the tile's capacity, or of its contents when they are above capacity (so a gain never exceeds its
    whole), and the text says which."""
    freed = min(max(float(freed), 0.0), float(used))
    return Gain(
        freed, "bytes", basis, whole=max(float(capacity), float(used)), of=tile_whole(tile, used, capacity)
    )


def _tile_list(frame: pd.DataFrame) -> list[int]:
    return [int(t) for t in frame["tile"].head(MAX_WHERE_TILES)]


def _oom_messages_finding(profile: Profile, ctx: RuleContext) -> Finding:
    """One error naming every tile of the out-of-memory messages, with bytes used, capacity and overflow."""
    oom = profile.out_of_memory
    frame = pd.DataFrame(
        {
            "compilation": oom["compilation"],
            "tile": oom["tile"],
            "bytes_used": oom["bytes_used"].astype("float64"),
            "capacity_bytes": oom["capacity_bytes"].astype("float64"),
            "over_bytes": oom["over_bytes"].astype("float64"),
            "line": oom["line"],
            "reason": oom["reason"],
            "profile_path": oom["profile_path"],
        }
    )
    compilations = int(frame["compilation"].nunique())
    parts = [_oom_part(row) for row in frame.head(MAX_WHERE_TILES).itertuples(index=False)]
    if len(frame) > MAX_WHERE_TILES:
        parts.append(f"and {units.count(len(frame) - MAX_WHERE_TILES)} more")
    head = (
        "compilation failed: out of memory"
        if compilations == 1
        else f"{units.count(compilations)} compilations failed: out of memory"
    )
    message = f"{head}: " + "; ".join(parts)
    if frame["tile"].notna().any():
        message += " (Poplar names one tile per failure; others may be over too)"
    fullest = frame.sort_values("bytes_used", ascending=False, kind="stable", na_position="last")
    tiles = list(dict.fromkeys(int(t) for t in fullest["tile"].dropna()))[:MAX_WHERE_TILES]
    count = mm.tiles_out_of_memory(profile) or float(max(len(tiles), 1))
    known = frame.dropna(subset=["over_bytes", "bytes_used", "capacity_bytes"])
    gain, share = None, None  # a message without figures (Poplar saved a profile instead) prices nothing
    if len(known):
        top = known.loc[known["over_bytes"].idxmax()]
        where_tile = f"tile {units.count(top['tile'])}" if pd.notna(top["tile"]) else "the tile named"
        gain = _tile_gain(
            top["over_bytes"],
            top["bytes_used"],
            top["capacity_bytes"],
            f"the bytes above capacity on {where_tile} (the largest overflow the messages print): what must "
            "leave that tile for the program to fit",
            where_tile,
        )
        share = gain.fraction  # the overflow's share of the tile's bytes
    return ctx.finding(
        "error",
        "Tiles out of memory",
        message,
        value=count,
        threshold=0.0,
        where={"tiles": tiles} if tiles else {},
        evidence=frame,
        figure="memory.tile_over_bytes",
        share=share,
        gain=gain,
    )


def _oom_part(row) -> str:  # noqa: ANN001  (a row of the messages frame)
    """One message in words: the tile and its figures, or the reason and the profile Poplar saved."""
    if pd.notna(row.tile) and pd.notna(row.bytes_used):
        return (
            f"tile {units.count(row.tile)} uses {units.nbytes(row.bytes_used)} of {units.nbytes(row.capacity_bytes)} "
            f"(over by {units.nbytes(row.over_bytes)})"
        )
    text = str(row.reason) if pd.notna(row.reason) else "no tile named"
    if pd.notna(row.profile_path):
        text += f"; Poplar saved the profile to {row.profile_path}: open it to see which tiles"
    return text


@rule(
    "memory.tile-oom",
    "tiles whose memory including gaps exceeds the tile's capacity",
    needs=[("tiles",), ("memory_totals",), ("out_of_memory",)],
    advice="Reduce memory on the listed tiles: lower the batch size or micro-batch, enable recomputation, "
    "shard or pipeline the model over more IPUs, lower availableMemoryProportion for matmuls and "
    "convolutions, or offload optimizer state; check the liveness peak for what is live there.",
)
def tile_oom(profile: Profile, ctx: RuleContext) -> list[Finding]:
    if profile.has("out_of_memory"):
        return [_oom_messages_finding(profile, ctx)]
    tiles = _tiles_used(profile)
    if tiles is not None:
        if tiles["capacity_bytes"].isna().all():
            raise NotEvaluated("needs the tile capacity (target bytes_per_tile)")
        count = mm.tiles_out_of_memory(profile) or 0.0
        if count <= 0:
            return []
        over = tiles[tiles["bytes_incl_gaps"] > tiles["capacity_bytes"]].copy()
        over["over_bytes"] = over["bytes_incl_gaps"] - over["capacity_bytes"]
        over = over.sort_values("bytes_incl_gaps", ascending=False, kind="stable").reset_index(drop=True)
        worst = over.iloc[0]
        message = (
            f"{plural(int(count), 'tile')} over capacity; tile {units.count(worst['tile'])} uses "
            f"{units.nbytes(worst['bytes_incl_gaps'])} including gaps = "
            f"{units.percent(worst['bytes_incl_gaps'] / worst['capacity_bytes'])} of "
            f"{units.nbytes(worst['capacity_bytes'])} "
            f"(over by {units.nbytes(worst['over_bytes'])}; error at > 100 %)"
        )
        ipus = sorted({int(i) for i in over["ipu"]})
        top = over.loc[over["over_bytes"].idxmax()]
        gain = _tile_gain(
            top["over_bytes"],
            top["bytes_incl_gaps"],
            top["capacity_bytes"],
            f"the bytes above the capacity of tile {units.count(top['tile'])}, the largest overflow: what must "
            "leave that tile for the program to fit",
            f"tile {units.count(top['tile'])}",
        )
        return [
            ctx.finding(
                "error",
                "Tiles out of memory",
                message,
                value=count,
                threshold=0.0,
                where={"tiles": _tile_list(over), "ipus": ipus},
                evidence=over,
                figure="memory.tile_over_bytes",
                share=gain.fraction,  # the overflow's share of the tile's bytes
                gain=gain,
            )
        ]
    # Text summary: the out-of-memory count from the metadata and the maximum from memory_totals.
    count = mm.tiles_out_of_memory(profile)
    used, tile = mm.max_tile_bytes(profile), mm.max_tile_index(profile)
    cap = mm.capacity_bytes(profile)
    if count is None:
        if used is None or cap is None:
            raise NotEvaluated(
                "needs per-tile memory, or a text summary with its out-of-memory count or "
                "maximum tile memory and the tile capacity"
            )
        count = 1.0 if used > cap else 0.0
    if count <= 0:
        return []
    message = f"{plural(int(count), 'tile')} over capacity"
    if used is not None and cap:
        where_tile = f"tile {units.count(tile)}" if tile is not None else "the fullest tile"
        message += (
            f"; {where_tile} uses {units.nbytes(used)} including gaps = {units.percent(used / cap)} of "
            f"{units.nbytes(cap)} "
            f"(over by {units.nbytes(used - cap)}; error at > 100 %)"
        )
    evidence = pd.DataFrame(
        {
            "tiles_out_of_memory": [count],
            "max_tile": [tile],
            "max_bytes_incl_gaps": [used],
            "capacity_bytes": [cap],
        }
    )
    gain = None
    if used is not None and cap:
        gain = _tile_gain(
            used - cap,
            used,
            cap,
            "the bytes above capacity on the summary's fullest tile: what must leave that tile for the "
            "program to fit",
            where_tile,
        )
    return [
        ctx.finding(
            "error",
            "Tiles out of memory",
            message,
            value=count,
            threshold=0.0,
            where={"tiles": [int(tile)]} if tile is not None else {},
            evidence=evidence,
            figure="memory.tile_over_bytes",
            share=None if gain is None else gain.fraction,
            gain=gain,
        )
    ]


@rule(
    "memory.headroom",
    "the fullest tile (including gaps) against the tile capacity",
    needs=[("tiles",), ("memory_totals",)],
    params={"warning": 0.85, "error": 0.95},
    advice="Leave headroom on the fullest tiles: rebalance tile mapping (e.g. poplar's tile mapping "
    "options or a smaller availableMemoryProportion), reduce batch size, or enable recomputation; "
    "code and exchange growth from small changes can push a nearly full tile over.",
)
def headroom(profile: Profile, ctx: RuleContext) -> list[Finding]:
    params = ctx.params
    share, used = mm.max_tile_utilisation(profile), mm.max_tile_bytes(profile)
    tile, cap = mm.max_tile_index(profile), mm.capacity_bytes(profile)
    if share is None or used is None or not cap:
        raise NotEvaluated("needs the fullest tile's memory and the tile capacity (target bytes_per_tile)")
    severity, threshold = band(share, params["warning"], params["error"])
    if severity is None:
        return []
    where_tile = f"tile {units.count(tile)}" if tile is not None else "the fullest tile"
    message = (
        f"{where_tile} uses {units.nbytes(used)} including gaps = {units.percent(share)} of {units.nbytes(cap)} "
        f"({severity} at >= {units.limit_percent(threshold)})"
    )
    tiles = _tiles_used(profile)
    where: dict = {"tiles": [int(tile)]} if tile is not None else {}
    evidence = None
    if tiles is not None:
        tiles = tiles.assign(utilisation=tiles["bytes_incl_gaps"] / tiles["capacity_bytes"])
        flagged = (
            tiles[tiles["utilisation"] >= params["warning"]]
            .sort_values("bytes_incl_gaps", ascending=False, kind="stable")
            .reset_index(drop=True)
        )
        if len(flagged) > 1:
            message += (
                f"; {units.count(len(flagged))} tiles at or above {units.limit_percent(params['warning'])}"
            )
        where = {"tiles": _tile_list(flagged), "ipus": sorted({int(i) for i in flagged["ipu"]})}
        evidence = flagged
    gain = _tile_gain(
        used - params["warning"] * cap,
        used,
        cap,
        f"the bytes on {where_tile} above the warning threshold ({units.limit_percent(params['warning'])} of "
        "its capacity): what must leave it to regain that headroom",
        where_tile,
    )
    return [
        ctx.finding(
            severity,
            "Little memory headroom",
            message,
            value=share,
            threshold=threshold,
            where=where,
            evidence=evidence,
            figure="memory.max_tile_utilisation",
            share=min(share, 1.0),
            gain=gain,
        )
    ]


@rule(
    "memory.tile-imbalance",
    "the fullest tile against the median tile, when both are large",
    needs=["tiles"],
    params={"ratio": 1.5, "min_fill": 0.7},
    advice="Memory is concentrated on a few tiles: look at what is mapped there (large constants, "
    "exchange code, tensors mapped to one tile, the first tile of each IPU) and spread it, e.g. "
    "with better tile mapping of large tensors or by splitting large operations.",
)
def tile_imbalance(profile: Profile, ctx: RuleContext) -> list[Finding]:
    params = ctx.params
    tiles = _tiles_used(profile)
    if tiles is None:
        raise NotEvaluated("needs per-tile memory (tiles.bytes_incl_gaps)")
    if tiles["capacity_bytes"].isna().all():
        raise NotEvaluated("needs the tile capacity (target bytes_per_tile)")
    used = tiles["bytes_incl_gaps"]
    median = float(used[used > 0].median()) if (used > 0).any() else 0.0
    if median <= 0:
        return []
    tiles = tiles.assign(ratio_to_median=used / median, fill=used / tiles["capacity_bytes"])
    flagged = tiles[(tiles["ratio_to_median"] >= params["ratio"]) & (tiles["fill"] >= params["min_fill"])]
    if flagged.empty:
        return []
    flagged = flagged.sort_values("bytes_incl_gaps", ascending=False, kind="stable").reset_index(drop=True)
    worst = flagged.iloc[0]
    message = (
        f"tile {units.count(worst['tile'])} holds {units.nbytes(worst['bytes_incl_gaps'])} = "
        f"{worst['ratio_to_median']:.2f} x the median tile ({units.nbytes(median)}) and {units.percent(worst['fill'])} "
        f"of capacity; {plural(len(flagged), 'tile')} flagged (warning at ratio >= {params['ratio']:g} "
        f"and fill >= {units.limit_percent(params['min_fill'])})"
    )
    gain = _tile_gain(
        worst["bytes_incl_gaps"] - median,
        worst["bytes_incl_gaps"],
        worst["capacity_bytes"],
        f"the bytes tile {units.count(worst['tile'])} holds above the median tile: what spreading its "
        "contents could take off it",
        f"tile {units.count(worst['tile'])}",
    )
    return [
        ctx.finding(
            "warning",
            "Tile memory imbalance",
            message,
            value=float(worst["ratio_to_median"]),
            threshold=float(params["ratio"]),
            where={"tiles": _tile_list(flagged), "ipus": sorted({int(i) for i in flagged["ipu"]})},
            evidence=flagged,
            figure="memory.max_tile_incl_gaps_bytes",
            share=min(float(worst["fill"]), 1.0),
            gain=gain,
        )
    ]


@rule(
    "memory.liveness-peak",
    "where not-always-live memory peaks (step, program, largest variables, operations), and whether "
    "always-live plus that peak nears the memory of a replica (liveness is per replica)",
    needs=["liveness"],
    params={"warning": 0.85, "error": 1.0, "top": 5},
    advice="To lower the peak, look at the variables and operations live at the peak step: recompute "
    "activations instead of storing them, reduce the micro-batch, change pipeline stages, or "
    "serialise large matmuls so fewer large temporaries are live at once.",
)
def liveness_peak(profile: Profile, ctx: RuleContext) -> list[Finding]:
    params = ctx.params
    liveness = profile.liveness
    nal = liveness["not_always_live_bytes"].astype("float64")
    if not nal.notna().any():
        raise NotEvaluated("needs liveness bytes (liveness.not_always_live_bytes is empty)")
    peak_step = int(mm.peak_liveness_step(profile))
    peak = float(mm.peak_not_always_live(profile))
    row = liveness.loc[liveness["step"] == peak_step].iloc[0]
    program = str(row["program"]) if pd.notna(row["program"]) else "?"
    # pva's liveness is per replica while tiles span every replica: compare one replica's
    # always-live + peak with one replica's memory (the same share as whole target vs whole target).
    replicas = mm.num_replicas(profile)
    always = mm.always_live_per_replica_bytes(profile)
    total_cap, num_tiles = mm.total_capacity(profile)
    if total_cap is not None and num_tiles is not None:
        total_cap, num_tiles = total_cap / replicas, num_tiles // replicas
    top = int(params["top"])
    where: dict = {"liveness_steps": (peak_step, peak_step), "programs": [program]}

    variables: list[tuple[str, float]] = []
    lv = profile.get("liveness_variables")
    if lv is not None and not lv.empty:
        at = lv[(lv["step"] == peak_step) & lv["bytes"].notna()]  # a variable without a size is not ranked
        at = at.sort_values("bytes", ascending=False, kind="stable").head(top)
        variables = [(str(n), float(b)) for n, b in zip(at["name"], at["bytes"], strict=True)]
        where["variables"] = [n for n, _ in variables]
    operations: list[str] = []
    ops = profile.get("operations")
    if ops is not None and not ops.empty:
        covering = ops[(ops["first_step"] <= peak_step) & (ops["last_step"] >= peak_step)]
        covering = covering.sort_values("bytes", ascending=False, kind="stable", na_position="last").head(top)
        operations = [
            str(n) + (f" ({lay})" if pd.notna(lay) else "")
            for n, lay in zip(covering["name"], covering["layer"], strict=True)
        ]
        where["operations"] = [str(n) for n in covering["name"]]

    per = " per replica" if replicas > 1 else ""
    message = (
        f"not-always-live memory peaks at liveness step {units.count(peak_step)} (program '{program}') "
        f"with {units.nbytes(peak)}{per}"
    )
    severity, threshold, share = "info", None, None
    if always is not None:
        together = always + peak
        message += f"; always-live {units.nbytes(always)}{per}, together {units.nbytes(together)}{per}"
        if total_cap:
            share = together / total_cap
            whole = "the total" if replicas == 1 else f"one replica's (of {units.count(replicas)})"
            message += (
                f" = {units.percent(share)} of {whole} {units.nbytes(total_cap)} "
                f"({units.count(num_tiles)} tiles)"
            )
            flagged, threshold = band(share, params["warning"], params["error"])
            if flagged is not None:
                severity = flagged
                message += f" ({severity} at >= {units.limit_percent(threshold)})"
    if variables:
        message += "; largest live variables: " + ", ".join(f"{n} ({units.nbytes(b)})" for n, b in variables)
    if operations:
        message += "; operations live there: " + ", ".join(operations)
    curve = pd.DataFrame(
        {"step": liveness["step"], "program": liveness["program"], "not_always_live_bytes": nal}
    )  # per replica, as is total_bytes
    if always is not None:
        curve["total_bytes"] = nal + always
    title = "Liveness peak near total memory" if severity != "info" else "Liveness peak"
    gain = None
    if share is not None and total_cap:
        # Only not-always-live memory can be lowered at the peak (recomputation, smaller micro-batches).
        above = min(max(together - params["warning"] * total_cap, 0.0), peak)
        gain = Gain(
            above,
            "bytes",
            f"always-live plus the peak's not-always-live bytes above {units.limit_percent(params['warning'])} "
            f"of {'the total' if replicas == 1 else 'one replica'}'s memory, at most the peak's not-always-live "
            "bytes (the part recomputation or a smaller micro-batch can lower)",
            whole=max(float(total_cap), float(together)),
            of="the target's memory" if replicas == 1 else "one replica's memory",
        )
    return [
        ctx.finding(
            severity,
            title,
            message,
            value=share if share is not None else peak,
            threshold=threshold,
            where=where,
            evidence=curve,
            figure="memory.peak_liveness_per_replica_bytes",
            share=None if share is None else min(share, 1.0),
            gain=gain,
        )
    ]


@rule(
    "memory.gaps",
    "memory lost to gaps, flagged only where it matters: on tiles near capacity that gaps push there",
    needs=[("tiles",), ("memory_totals",)],
    params={"warning": 0.10, "min_fill": 0.85},
    advice="Gaps come from memory-bank constraints on where data may live; large gap shares often "
    "follow from many small or oddly sized tensors. On the listed tiles they cost real headroom: "
    "try poplar's memory allocation options, padding or grouping tensors, or fewer, larger "
    "variables per tile.",
)
def gaps(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """Gaps are only a problem when they take the room a nearly full tile needs (see docs/rules.md).

    A tile is flagged when, including gaps, it is at or above ``min_fill`` of its capacity and gaps are
    at least ``warning`` of its bytes including gaps. Severity is at most ``warning``: a tile over
    capacity is ``memory.tile-oom``'s error; this rule says that gaps are why.
    """
    params = ctx.params
    share, lost, total = mm.gap_share(profile), mm.gap_bytes(profile), mm.total_incl_gaps(profile)
    if share is None or lost is None or total is None:
        raise NotEvaluated("needs memory including and excluding gaps (per tile or as totals)")
    overall = (
        f"over the whole profile gaps take {units.nbytes(lost)} = {units.percent(share)} of the "
        f"{units.nbytes(total)} used"
    )
    tiles = _tiles_used(profile)
    if tiles is not None:
        if tiles["capacity_bytes"].isna().all():
            raise NotEvaluated("needs the tile capacity (target bytes_per_tile): gaps matter only near it")
        gap = tile_gaps(tiles).astype("float64")
        incl = tiles["bytes_incl_gaps"]
        evidence = tiles.assign(
            gap_bytes=gap,
            gap_share=(gap / incl.where(incl > 0)).fillna(0.0),
            fill=incl / tiles["capacity_bytes"],
            fill_excl_gaps=tiles["bytes_excl_gaps"] / tiles["capacity_bytes"],
        )
        flagged = evidence[
            (evidence["fill"] >= params["min_fill"]) & (evidence["gap_share"] >= params["warning"])
        ]
        if flagged.empty:
            return []
        flagged = flagged.sort_values(
            ["bytes_incl_gaps", "gap_bytes"], ascending=False, kind="stable"
        ).reset_index(drop=True)
        worst = flagged.iloc[0]
        fit = int(
            (
                (flagged["bytes_incl_gaps"] > flagged["capacity_bytes"])
                & (flagged["bytes_excl_gaps"] <= flagged["capacity_bytes"])
            ).sum()
        )
        message = (
            f"{plural(len(flagged), 'tile')} at >= {units.limit_percent(params['min_fill'])} of capacity "
            f"{'loses' if len(flagged) == 1 else 'lose'} "
            f">= {units.limit_percent(params['warning'])} to gaps; tile {units.count(worst['tile'])}: "
            f"{units.nbytes(worst['bytes_incl_gaps'])} including gaps = {units.percent(worst['fill'])} of "
            f"{units.nbytes(worst['capacity_bytes'])}, {units.nbytes(worst['bytes_excl_gaps'])} without "
            f"(gaps {units.percent(worst['gap_share'])})"
        )
        if fit:
            message += f"; {units.count(fit)} of them are over capacity only because of gaps"
        message += f"; {overall}"
        gain = _tile_gain(
            worst["gap_bytes"],
            worst["bytes_incl_gaps"],
            worst["capacity_bytes"],
            f"the gap bytes of tile {units.count(worst['tile'])}, the fullest flagged tile: what packing its "
            "data without gaps could free there",
            f"tile {units.count(worst['tile'])}",
        )
        return [
            ctx.finding(
                "warning",
                "Gaps cost headroom on full tiles",
                message,
                value=float(worst["gap_share"]),
                threshold=float(params["warning"]),
                where={"tiles": _tile_list(flagged), "ipus": sorted({int(i) for i in flagged["ipu"]})},
                evidence=flagged,
                figure="memory.tile_gap_bytes",
                share=float(worst["gap_share"]),
                gain=gain,
            )
        ]
    # Totals only (a text summary): the fullest tile against capacity, the profile's gap share for the tile.
    fill, used = mm.max_tile_utilisation(profile), mm.max_tile_bytes(profile)
    if fill is None or used is None:
        raise NotEvaluated("needs the fullest tile and the tile capacity: gaps matter only on tiles near it")
    if fill < params["min_fill"] or share < params["warning"]:
        return []
    tile = mm.max_tile_index(profile)
    where_tile = f"tile {units.count(tile)}" if tile is not None else "the fullest tile"
    message = (
        f"{where_tile} uses {units.nbytes(used)} including gaps = {units.percent(fill)} of capacity "
        f"(flagged at >= {units.limit_percent(params['min_fill'])}) while {overall} "
        f"(warning at >= {units.limit_percent(params['warning'])})"
    )
    cap = mm.capacity_bytes(profile) or used
    gain = _tile_gain(
        share * used,
        used,
        cap,
        f"the profile's gap share applied to {where_tile} (a summary gives gaps as totals only): what packing "
        "its data without gaps could free there",
        where_tile,
    )
    return [
        ctx.finding(
            "warning",
            "Gaps cost headroom on full tiles",
            message,
            value=share,
            threshold=float(params["warning"]),
            where={"tiles": [int(tile)]} if tile is not None else {},
            figure="memory.gap_share",
            share=share,
            gain=gain,
        )
    ]
