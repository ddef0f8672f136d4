"""What limits a run: the time account's parts in five groups, pooled over devices, and the largest of them.

The one definition of the run's limit (``docs/figures.md``, "What limits the run"): summary's "What limits
this run" states it and ``popprof pilot`` diagnoses each side with it (after its memory test). Each part of the
account belongs to one group; the share of a group is its time summed over devices over the devices' windows
summed (the account's pooling, :func:`popprof.metrics.account.pooled`):

- ``device compute``: ``compute`` (GPU and IPU);
- ``data movement``: GPU ``communication`` less its wait for the last rank, ``copies``; IPU ``exchange``,
  ``global_exchange``, ``stream_copies``;
- ``load imbalance``: work waiting for other work to catch up: the part of a GPU's ``communication`` spent
  waiting for the last rank; an IPU's ``sync`` (tiles or IPUs waiting for each other) and its ``idle`` in an
  ``ipu_run`` window (waiting for the busiest IPU);
- ``host``: GPU ``idle_host``; an IPU's ``idle`` in a ``.pvti`` device's window (no device run submitted);
- ``launch or dependency``: GPU ``idle_launch``.

What no group holds (``idle_other``, ``other``, the ``idle`` of a text summary's totals) is unattributed: when it
is larger than every group the limit is ``undetermined``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..model.profile import Profile
from ..trace.intervals import device_label
from .account import run_account
from .collectives import skew_spans

COMPUTE = "device compute"
DATA_MOVEMENT = "data movement"
IMBALANCE = "load imbalance"
HOST = "host"
LAUNCH = "launch or dependency"
UNDETERMINED = "undetermined"
#: The groups, in the order a tie is broken (the first of equal shares is the limit).
LIMITS: tuple[str, ...] = (COMPUTE, DATA_MOVEMENT, IMBALANCE, HOST, LAUNCH)
#: The account's parts in each group, whatever the basis (the IPU's ``idle`` goes by basis: :data:`IDLE_BY_BASIS`).
_GROUP_PARTS: dict[str, tuple[str, ...]] = {
    COMPUTE: ("compute",),
    DATA_MOVEMENT: ("communication", "copies", "exchange", "global_exchange", "stream_copies"),
    IMBALANCE: ("sync",),
    HOST: ("idle_host",),
    LAUNCH: ("idle_launch",),
}
#: Where an IPU's ``idle`` goes, by the window's basis (``metrics/account.py``); missing: unattributed.
IDLE_BY_BASIS: dict[str, str] = {"ipu_run": IMBALANCE, "device_span": HOST}


def limit_of(devices: Iterable[Mapping]) -> dict | None:
    """The run's limit from the account's run rows: each ``{"basis", "window_us", part: us, ...}`` (missing or
    NaN parts count nothing) with ``waiting_us``, the part of its ``communication`` spent waiting for the last
    rank (0 without). ``{"limit", "share", "groups": {limit: share} (largest first, empty groups left out),
    "unattributed": share, "devices": the devices pooled}``; None without a window."""
    totals = dict.fromkeys(LIMITS, 0.0)
    window = unattributed = 0.0
    count = 0
    for row in devices:
        window += float(row["window_us"])
        count += float(row["window_us"]) > 0
        for group, parts in _GROUP_PARTS.items():
            totals[group] += sum(_us(row, part) for part in parts)
        waiting = min(float(row.get("waiting_us") or 0.0), _us(row, "communication"))
        totals[DATA_MOVEMENT] -= waiting
        totals[IMBALANCE] += waiting
        idle_group = IDLE_BY_BASIS.get(row.get("basis"))
        if idle_group is None:
            unattributed += _us(row, "idle")
        else:
            totals[idle_group] += _us(row, "idle")
        unattributed += _us(row, "idle_other") + _us(row, "other")
    if window <= 0:
        return None
    shares = {g: v / window for g, v in totals.items() if v > 0}
    groups = dict(sorted(shares.items(), key=lambda pair: (-pair[1], LIMITS.index(pair[0]))))
    rest = unattributed / window
    first = next(iter(groups.items()), None)
    if first is None or rest > first[1]:
        first = (UNDETERMINED, rest)
    return {"limit": first[0], "share": first[1], "groups": groups, "unattributed": rest, "devices": count}


def run_limit(profile: Profile) -> dict | None:
    """:func:`limit_of` the profile's run rows (:func:`popprof.metrics.account.run_account`), each GPU device's
    wait for the last rank from :func:`popprof.metrics.collectives.skew_spans`; None without an account."""
    runs = run_account(profile)
    if runs.empty:
        return None
    waits = skew_spans(profile) if (runs["platform"] == "gpu").any() else {}
    rows = runs.to_dict("records")
    for row in rows:
        waited = waits.get(device_label(row["rank"], row["device"]))
        if waited is not None:
            row["waiting_us"] = float((waited[1] - waited[0]).sum())
    return limit_of(rows)


def _us(row: Mapping, part: str) -> float:
    value = row.get(part)
    if value is None:
        return 0.0
    value = float(value)
    return 0.0 if value != value else value
