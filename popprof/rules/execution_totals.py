"""The exchange share of a run known only from a Poplar text summary's Execution section.

A text summary has no steps, only category totals (``execution_totals``). :func:`summary_share`
evaluates the ``exchange.share`` rule on them: exchange + global exchange + sync as a share of the
total cycles (SDK 2.x/3.x: of the average tile's cycles), with the rule's bands. Figures the summary
did not print ("Must enable ...") are left out and named in the message, never counted as 0.
"""

from __future__ import annotations

import pandas as pd

from ..io import units
from ..metrics import execution as ex
from ..model.profile import Profile
from .base import Finding, Gain, NotEvaluated, RuleContext, band

#: Categories that count as exchange, and how the message names them.
EXCHANGE_NAMES = {"exchange": "IPU exchange", "global_exchange": "global exchange", "sync": "sync"}


#: Advice when sync, not exchange, dominates: tiles waiting for each other or for the host move no data, so
#: exchange advice does not apply.
ADVICE_SYNC = (
    "Most of this time is sync: tiles waiting at synchronisation points for the slowest tile or for "
    "the host, not moving data, so making exchange cheaper will not help. Look for compute imbalance "
    "across tiles (a few tiles with much more work than the rest: see tile balance in the execution "
    "profile), for stream copies the device waits on (stream copies and the data feed: host.stream-copy; "
    "prefetch, more device iterations or batches per step), and on multi-IPU or replicated runs for a "
    "slower IPU or replica the others wait for."
)


def sync_dominated(shares: dict[str, float | None]) -> bool:
    """Sync takes more than IPU and global exchange together (shares by category; missing ones as 0)."""
    sync = shares.get("sync") or 0.0
    return sync > (shares.get("exchange") or 0.0) + (shares.get("global_exchange") or 0.0)


def summary_share(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """``exchange.share`` from ``execution_totals``: one finding (info below the bands)."""
    params = ctx.params
    shares = ex.summary_shares(profile)
    value = ex.summary_exchange_share(profile)
    if value is None:
        raise NotEvaluated("needs the summary's total cycles and its exchange or sync figures")
    parts = [
        f"{name} {units.percent(shares[cat])}"
        for cat, name in EXCHANGE_NAMES.items()
        if shares.get(cat) is not None
    ]
    unknown = [name for cat, name in EXCHANGE_NAMES.items() if cat in shares and shares[cat] is None]
    basis = set(profile.execution_totals["basis"].astype(str)) - {"total"}
    of = "of the average tile's cycles" if "tile_average" in basis else "of the total cycles"
    severity, threshold = band(value, params["warning"], params["error"])
    message = f"exchange + global exchange + sync take {units.percent(value)} {of} in the summary ({', '.join(parts)})"
    if unknown:
        message += f"; not printed: {', '.join(unknown)} (left out)"
    message += (
        f" ({severity} at >= {units.limit_percent(threshold)})"
        if severity
        else f" (warning at >= {units.limit_percent(params['warning'])})"
    )
    gsev, gthr = None, None
    gshare = shares.get("global_exchange")
    if gshare is not None and int(profile.target_value("num_ipus", 1) or 1) > 1:
        gsev, gthr = band(gshare, params["global_warning"], params["global_error"])
        if gsev:
            message += (
                f"; global (inter-IPU) exchange {units.percent(gshare)} ({gsev} at >= "
                f"{units.limit_percent(gthr)})"
            )
    worst = max([s for s in (severity, gsev) if s], key=["warning", "error"].index, default="info")
    sync = worst != "info" and sync_dominated(shares)
    if sync:
        message += "; sync is most of it: tiles waiting for each other or for the host, not exchanging"
    evidence = pd.DataFrame({"category": list(shares), "share": [shares[c] for c in shares]})
    title = "Exchange share" if worst == "info" else ("Sync-bound run" if sync else "Exchange-bound run")
    window = ex.total_time_us(profile)
    spent = ex.category_time_us(profile, ("exchange", "global_exchange", "sync"))
    gain = None
    if window and spent is not None:
        gain = Gain(
            min(spent, window),
            "us",
            "the summary's exchange + global exchange + sync share of its "
            + (
                "total cycles over the clock"
                if profile.target_value("clock_hz")
                else "printed approximate time"
            )
            + ", were all of it removed or hidden behind compute",
            whole=window,
            rests_on=("exchange", "global_exchange", "sync"),
        )
    return [
        ctx.finding(
            worst,
            title,
            message,
            value=value,
            threshold=threshold,
            evidence=evidence,
            advice=ADVICE_SYNC if sync else None,
            figure="execution.exchange_and_sync_share",
            share=value,
            gain=gain,
        )
    ]
