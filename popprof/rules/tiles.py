"""The fullest tile explained as a finding: what fills it and the largest saving FP16 storage, recomputation
or offloading would make there.

The figure is :func:`popprof.metrics.tiles.fullest_tile`; the rule adds the threshold (how full the tile
must be to be worth explaining), the advice naming the option and the gain (the largest known saving, in
bytes of the tile). Its severity is ``info``: ``memory.headroom`` and ``memory.tile-oom`` grade the tile.
"""

from __future__ import annotations

from ..io import units, words
from ..metrics import memory as mm
from ..metrics.tiles import SAVINGS, fullest_tile, overflowed
from ..model.profile import Profile
from .base import Finding, Gain, NotEvaluated, RuleContext, rule, tile_whole

#: Advice per saving: what to do on the fullest tile.
OPTION_ADVICE = {
    "fp16": "Store the tile's float32 variables in FP16 (half): weights, activations and optimizer state in "
    "half precision, keeping float32 where accuracy needs it (master weights, accumulators); FP16 "
    "storage halves their bytes.",
    "recomputation": "Recompute activations in the backward pass instead of storing them (recomputation "
    "checkpoints, e.g. PopART's autoRecomputation or the pipeline's recomputation mode), which lowers the "
    "not-always-live peak on this tile at the cost of extra compute.",
    "offloading": "Offload optimizer state and gradient accumulators to remote (streaming) memory (variable "
    "offloading: PopART's optimizerStateTensorLocationSettings, TensorFlow's offload_weight_update_variables), "
    "which frees their always-live bytes at the cost of loading them at each weight update.",
}


@rule(
    "memory.fullest-tile",
    "the fullest tile explained (bytes by category, variables and vertices where the profile holds them) "
    "with what FP16 storage, recomputation or offloading would free there",
    needs=[("tiles",), ("memory_totals",), ("out_of_memory",)],
    params={"min_fill": 0.80},
    advice="Look at what fills the fullest tile (the categories, variables and vertices of the message) and "
    "free it with FP16 storage of float32 variables, recomputation of activations, or offloading optimizer "
    "state to remote memory; the finding names the option that frees the most.",
)
def fullest(profile: Profile, ctx: RuleContext) -> list[Finding]:
    doc = fullest_tile(profile)
    if doc is None:
        raise NotEvaluated(
            "needs the fullest tile's bytes (per-tile memory, a summary's maximum or tile block)"
        )
    used, cap, fill = doc["bytes_incl_gaps"], doc["capacity_bytes"], doc["utilisation"]
    over = overflowed(doc) or bool(mm.tiles_out_of_memory(profile))
    if not over and (fill is None or fill < float(ctx.params["min_fill"])):
        return []
    best = doc["largest_saving"]
    if best is None:
        return []  # nothing known would free bytes: the headroom and tile-oom rules say how full it is
    saving = doc["savings"][best]
    where_tile = f"tile {units.count(doc['tile'])}" if doc["tile"] is not None else "the fullest tile"
    size = f"{units.nbytes(used)}" + (f" = {units.percent(fill)} of {units.nbytes(cap)}" if cap else "")
    parts = [f"{where_tile} holds {size}"]
    if doc["categories"]:
        parts.append(
            "largest: "
            + ", ".join(f"{c['category']} {units.nbytes(c['bytes'])}" for c in doc["categories"][:3])
        )
    live = doc["liveness"] or {}
    if live.get("always_live_bytes") is not None and live.get("not_always_live_bytes") is not None:
        parts.append(
            f"variables always-live {units.nbytes(live['always_live_bytes'])}, not-always-live at the peak "
            f"{units.nbytes(live['not_always_live_bytes'])}"
        )
    if doc["vertices"]:
        parts.append(f"vertex state mostly {doc['vertices'][0]['type']}")
    if doc["variables"]:
        scope = "on it" if doc["variables_scope"] == "tile" else "of the graph (no tile recorded)"
        parts.append(f"largest variable {scope}: {doc['variables'][0]['name']}")
    frees = [
        f"{words.MEMORY_SAVING_WORDS[k]} {units.nbytes(doc['savings'][k]['bytes'])}"
        if doc["savings"][k]["bytes"] is not None
        else f"{words.MEMORY_SAVING_WORDS[k]} unknown"
        for k in SAVINGS
    ]
    message = "; ".join(parts) + "; would free at most: " + ", ".join(frees)
    whole = max(float(cap or 0.0), float(used))
    gain = Gain(
        saving["bytes"],
        "bytes",
        f"{words.MEMORY_SAVING_WORDS[best]} on {where_tile}: {saving['basis']}",
        whole=whole,
        of=tile_whole(where_tile, used, cap),
    )
    where: dict = {"tiles": [int(doc["tile"])]} if doc["tile"] is not None else {}
    if doc["variables"]:
        where["variables"] = [v["name"] for v in doc["variables"]]
    return [
        ctx.finding(
            "info",
            f"Fullest tile: {words.MEMORY_SAVING_WORDS[best]} frees the most",
            message,
            value=float(saving["bytes"]),
            threshold=float(ctx.params["min_fill"]),
            where=where,
            advice=OPTION_ADVICE[best],
            platform="ipu",
            figure="memory.max_tile_incl_gaps_bytes",
            share=gain.fraction,
            gain=gain,
        )
    ]
