"""Cross-rank rules: a rank that makes the others wait (a straggler), and collective time spent waiting (skew).

HolisticTraceAnalysis's definition (``get_potential_stragglers``, HTA 0.5): in a run with blocking
collectives, the straggler is the rank that *starts* the iteration's last long collective late; the others
reached it earlier and wait inside it, so they show the longer collective and the longer step, not the
straggler. The figure is :func:`popprof.metrics.ranks.collective_late_start`: per iteration, how much later
the rank's last long collective starts than the other ranks' median, in iterations. HTA always names its top
candidates; this rule names the ranks whose late start stands out (at ``late_warning`` of an iteration or
more, on average over the iterations), which are HTA's top candidates for that many ranks, and says which
ranks arrive first (they wait longest; they are not the cause).
"""

from __future__ import annotations

from ..io import units
from ..io.plural import plural
from ..metrics.account import run_account
from ..metrics.collectives import collective_calls, collective_skew_by_rank, skew_spans, waits_for_rank
from ..metrics.ranks import collective_late_start, straggler_candidates
from ..model.profile import Profile
from .base import Finding, Gain, NotEvaluated, RuleContext, band, rule


@rule(
    "distributed.stragglers",
    "ranks that start the last long collective of each iteration late (the ranks the others wait for)",
    needs=["events"],
    params={
        "late_warning": 0.10,
        "late_error": 0.25,
        "top": 3,
    },
    advice={
        "ipu": "One instance or replica is slower than the others and they wait for it at every "
        "collective: look at what differs on that host (data loading, host load, a slower "
        "link or a different program), balance pipeline stages, and check its host "
        "data pipeline.",
        "gpu": "One rank is slower than the others and they wait for it inside every collective: check "
        "what differs on that rank (its data-loader workers and input pipeline, host CPU load, "
        "extra host-device synchronisations, logging or checkpointing done on rank 0 only, "
        "thermal throttling or a slower GPU/link), and balance the work per rank "
        "(uneven batches or sequence lengths).",
        "tpu": "One process is slower than the others and they wait for it inside every collective: check "
        "what differs on its host (input pipeline, host CPU load, transfers that wait for a result such as "
        "np.asarray of a jax.Array, logging or checkpointing on process 0 only), and balance the work per "
        "chip (uneven shards or sequence lengths).",
    },
)
def stragglers(profile: Profile, ctx: RuleContext) -> list[Finding]:
    params = ctx.params
    late = collective_late_start(profile)
    if late.empty:
        raise NotEvaluated(
            "needs traces of at least two ranks with ProfilerStep markers and long collectives (open a "
            "directory of rank traces recorded with a profiler schedule)"
        )
    per_rank = (
        late.groupby("rank")
        .agg(
            late_us=("late_us", "mean"),
            late_iterations=("late_iterations", "mean"),
            iterations=("late_us", "count"),
        )
        .reset_index()
    )
    per_rank["hta_candidate"] = per_rank["rank"].isin(straggler_candidates(late, 2))
    flagged = per_rank[per_rank["late_iterations"] >= params["late_warning"]].sort_values(
        "late_iterations", ascending=False
    )
    if flagged.empty:
        return []
    worst = flagged.iloc[0]
    value = float(worst["late_iterations"])
    severity, threshold = band(value, params["late_warning"], params["late_error"])
    mean_iteration = late.attrs["mean_iteration_us"]
    n = int(params["top"])
    parts = [
        f"rank {int(row.rank)} {units.duration(row.late_us)} ({row.late_iterations:.2f} of an iteration)"
        for row in flagged.head(n).itertuples()
    ]
    ranks = [int(x) for x in flagged["rank"]]
    message = (
        f"{len(ranks)} of {len(per_rank)} ranks start the last long collective of each iteration late, "
        f"so the others wait for them inside it: " + ", ".join(parts)
    )
    if len(ranks) > n:
        message += f" ({len(ranks) - n} more in the evidence)"
    message += (
        f"; worst {value:.2f} of an iteration ({severity} at >= {threshold:g}), after the other ranks' "
        f"median start, mean over {plural(int(worst['iterations']), 'iteration')} of {units.duration(mean_iteration)}"
        f" ({late.attrs['collective'].split('(')[0]}; HTA's late-start metric)"
    )
    early = per_rank[per_rank["late_iterations"] <= -params["late_warning"]].sort_values("late_iterations")
    early = [int(x) for x in early["rank"] if int(x) not in ranks]
    if early:
        ranks_word = "rank" if len(early) == 1 else "ranks"
        message += (
            f"; first to arrive, waiting longest (not the cause): {ranks_word} {', '.join(map(str, early))}"
        )
    # The others wait for the worst rank inside the collective for its late start, every iteration: where
    # the trace shows those waits on their devices (skew with no compute beside it), that device time, of the
    # ranks' windows, as the collective skew is priced (and inside its spans, so the two count it once);
    # else its mean late start times the iterations, of those iterations' time.
    rests_on = ("communication",) if ctx.platform == "gpu" else ("sync", "global_exchange")
    spans = waits_for_rank(profile, late, int(worst["rank"]))
    runs = run_account(profile)
    windows = float(runs[runs["rank"].isin(per_rank["rank"].tolist())]["window_us"].sum())
    gain = None
    if spans and windows > 0:
        waited = sum(float((end - start).sum()) for start, end in spans.values())
        gain = Gain(
            min(waited, windows),
            "us",
            f"the time the other ranks' devices wait for rank {int(worst['rank'])} inside the last long "
            "collective of each iteration with no compute beside it, summed over them, were it on time",
            whole=windows,
            rests_on=rests_on,
            spans=spans,
        )
    else:
        iterations = int(worst["iterations"])
        window = float(mean_iteration) * iterations
        waited = max(float(worst["late_us"]), 0.0) * iterations
        if window > 0:
            gain = Gain(
                min(waited, window),
                "us",
                f"the time the other ranks wait for rank {int(worst['rank'])} inside the last long collective "
                f"(its mean late start times {plural(iterations, 'iteration')}), of those iterations' time, were it on "
                "time",
                whole=window,
                rests_on=rests_on,
            )
    return [
        ctx.finding(
            severity,
            "Straggling rank(s)",
            message,
            value=value,
            threshold=threshold,
            where={"ranks": ranks},
            evidence=per_rank,
            figure="ranks.collective_late_start_us",
            share=min(max(value, 0.0), 1.0),
            gain=gain,
        )
    ]


@rule(
    "distributed.collective-skew",
    "collective time spent waiting for the last rank to arrive (synchronisation skew), across ranks",
    needs=["events"],
    params={"warning": 0.05, "error": 0.50, "top": 3},
    advice={
        "ipu": "The replicas wait inside their collectives for the last one to arrive: balance the work "
        "before each collective (pipeline stages, uneven batches), and look at what delays the "
        "replica that arrives last (its host, data pipeline or link).",
        "gpu": "The ranks wait inside their collectives for the last rank to arrive, so that time is "
        "synchronisation, not transfer: balance the work before each collective (uneven batches or "
        "sequence lengths, rank-0-only logging or checkpointing), find the rank that arrives last "
        "(distributed.stragglers, the rank with the least skew) and what delays it, and overlap "
        "collectives with compute (bucketed gradients, async ops) so that waiting ranks compute.",
        "tpu": "The chips wait inside their collectives for the last one to arrive, so that time is "
        "synchronisation, not transfer: balance the work before each collective (uneven shards or "
        "sequence lengths, process-0-only logging or checkpointing), find the process that arrives last "
        "and what delays its host, and let XLA overlap collectives with compute so that waiting chips "
        "compute.",
    },
)
def collective_skew(profile: Profile, ctx: RuleContext) -> list[Finding]:
    params = ctx.params
    per_rank = collective_skew_by_rank(profile)
    if per_rank.empty:
        raise NotEvaluated(
            "needs the collectives of at least two ranks (open a directory of rank traces as one run)"
        )
    runs = run_account(profile)
    runs = runs[runs["rank"].isin(per_rank["rank"].tolist())]
    window = float(runs["window_us"].sum())
    if window <= 0:
        raise NotEvaluated("needs device time on the ranks with collectives")
    skew = float(per_rank["skew_us"].sum())
    total = float(per_rank["time_us"].sum())
    value = skew / window
    severity, threshold = band(value, params["warning"], params["error"])
    if severity is None:
        return []
    ordered = per_rank.sort_values("skew_us", ascending=False)
    n = int(params["top"])
    parts = [
        f"rank {int(row.rank)} {units.duration(row.skew_us)} ({units.percent(row.skew_share)})"
        for row in ordered.head(n).itertuples()
    ]
    calls = collective_calls(profile)
    matched = calls[calls["matched_ranks"] > 1]
    collectives = matched.groupby(["name", "group", "seq"]).ngroups
    # the rank that arrives last at a collective waits for nobody in it: count those per rank
    last = matched[matched["skew_us"] <= 0].drop_duplicates(["name", "group", "seq"])["rank"].value_counts()
    message = (
        f"{len(per_rank)} ranks spend {units.duration(skew)} of their {units.duration(total)} in "
        f"{collectives:,} collectives waiting for the last rank to arrive (synchronisation skew, "
        f"{units.percent(skew / total if total else 0.0)} of it): {units.percent(value)} of their device "
        f"time ({severity} at >= {units.limit_percent(threshold)}); most: " + ", ".join(parts)
    )
    if len(last):
        message += (
            f"; last to arrive (the rank the others wait for): rank {int(last.index[0])} in "
            f"{int(last.iloc[0]):,} of the {collectives:,}"
        )
    # what arriving together would save: the waits the devices spent in nothing else (no compute beside them)
    spans = skew_spans(profile)
    exposed = sum(float((end - start).sum()) for start, end in spans.values())
    gain = Gain(
        min(exposed, window),
        "us",
        "the synchronisation skew inside the collectives not overlapped by compute, summed over the ranks "
        "(each rank's wait from its own start until the last rank started), were every rank to arrive "
        "together",
        whole=window,
        rests_on=("communication",) if ctx.platform == "gpu" else ("sync", "global_exchange"),
        spans=dict(spans),
    )
    return [
        ctx.finding(
            severity,
            "Collective skew",
            message,
            value=value,
            threshold=threshold,
            where={"ranks": [int(r) for r in ordered["rank"]]},
            evidence=per_rank,
            figure="collectives.skew_us",
            share=min(value, 1.0),
            gain=gain,
        )
    ]
