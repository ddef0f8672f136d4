"""Gains counted once: the time gains of a profile's findings held to the time account.

Each rule prices its own finding (:class:`popprof.rules.base.Gain`) as an upper bound on the figure it rests
on. Two findings may rest on the same time (the idle gaps one rule blames on the host, another on long host
events), and a sum of their gains would promise more than the device ever lost. :func:`count_once` takes
the findings in their ranking order (largest gain first) and lets each take only what is left of the
account's parts it rests on, per device (a gain naming its ``device``, or a finding naming one device) or
pooled over the devices (a finding naming several, or none), and never more than what is left of the
window. A gain that says which device time it rests on (``Gain.spans``: the gaps of ``host.device-gaps``,
the idle during ``host.long-events``' events, the short gaps of ``host.launch-overhead``) takes only the part
of those intervals that no higher-ranked gain with spans took: two gains on the same gaps count them once,
two gains on the same part at other times both count. A pooled gain with spans (the collective skew, the
ranks' together) is also taken off each device's budget by the part of its spans on that device, so a later
gain on one device's part gets only what it left there. A gain cut by more than a thousandth says so in its
``basis`` (a smaller cut is the rounding between two definitions of one time). Memory gains (bytes) are
left as they are: each rests on its own bytes.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ..io import units
from ..metrics.account import PARTS, run_account
from ..model.profile import Profile
from ..trace.intervals import device_label
from ..trace.spans import merge_intervals, subtract_intervals

_ALL = "all devices"

#: A cut smaller than this share of a gain is not noted in its basis (two definitions of one time round apart).
NOTED_CUT = 1e-3
#: What is left of a budget below this (us, a picosecond) is the rounding of the subtractions, not time: none.
RESIDUE_US = 1e-6


def _budgets(profile: Profile) -> dict[str, dict[str, float]]:
    """What each device (by its label) and all devices together have of each part and of the window."""
    runs = run_account(profile)
    out: dict[str, dict[str, float]] = {}
    pooled: dict[str, float] = {"window_us": 0.0}
    for row in runs.to_dict("records"):
        parts = {p: float(row[p]) for p in PARTS if not pd.isna(row[p])}
        parts["window_us"] = float(row["window_us"])
        out[device_label(row["rank"], row["device"])] = parts
        for key, value in parts.items():
            pooled[key] = pooled.get(key, 0.0) + value
    if out:
        out[_ALL] = pooled
    return out


def _device_key(finding, budgets: dict[str, dict[str, float]]) -> str:
    named = finding.estimated_gain.device
    if named and named in budgets:
        return named  # the gain says whose time it is (a rule that prices the device with the most)
    devices = finding.where.get("devices") or []
    if len(devices) == 1 and str(devices[0]) in budgets:
        return str(devices[0])
    if len(budgets) == 2:  # one device: what names no device names that one
        return next(k for k in budgets if k != _ALL)
    return _ALL


def count_once(profile: Profile, findings: list) -> None:
    """Cut the time gains of ``findings`` (in ranking order) so that no time of the account is promised
    twice and a device's gains never exceed its window; in place. Findings without a time gain, and
    profiles without an account, are left as they are."""
    budgets = _budgets(profile)
    if not budgets:
        return
    claimed: dict[
        str, tuple[np.ndarray, np.ndarray]
    ] = {}  # per device, the spans of the gains counted so far
    for finding in findings:
        gain = finding.estimated_gain
        if gain is None or gain.unit != "us" or gain.value is None:
            continue
        key = _device_key(finding, budgets)
        if key != _ALL and gain.device is None:  # whose window the gain is a share of, as the text says
            gain = finding.estimated_gain = replace(gain, device=key)
        parts = [p for p in gain.rests_on if p in budgets[key]]
        available = min(_available(budgets[key], parts), _available(budgets[_ALL], parts))
        where: dict[str, float] = {}  # a pooled gain's free spans per device: what it takes from each
        if gain.spans:
            where = _claim(claimed, gain.spans, key)
            available = min(available, sum(where.values()))
        value = min(float(gain.value), available)
        value = value if value >= RESIDUE_US else 0.0
        if value < float(gain.value) * (1 - NOTED_CUT):
            what = " + ".join(parts) if parts else "the window"
            note = (
                f" Counted once: cut to the {units.duration(value)} of {what} on {key} "
                "that higher-ranked findings had not already claimed."
            )
            basis = gain.basis.rstrip()
            basis += "" if basis.endswith(".") else "."
            finding.estimated_gain = replace(gain, value=value, basis=basis + note)
        elif value < float(gain.value):
            finding.estimated_gain = replace(gain, value=value)
        _spend(budgets, key, parts, value)
        if key == _ALL and value > 0:  # a pooled gain that says where its time lies: off those devices too
            free = sum(where.values())
            for device, length in where.items():
                if device in budgets and device != _ALL and length > 0:
                    _spend_from(budgets[device], parts, value * length / free)


def _claim(claimed: dict[str, tuple[np.ndarray, np.ndarray]], spans: dict, key: str) -> dict[str, float]:
    """Per device (``None`` in ``spans``: the device ``key``), the length of its ``spans`` that ``claimed``
    does not hold yet; then ``claimed`` holds them too."""
    free: dict[str, float] = {}
    for device, (start, end) in spans.items():
        device = key if device is None else device
        start, end = merge_intervals(np.asarray(start, dtype=np.float64), np.asarray(end, dtype=np.float64))
        taken = claimed.get(device)
        if taken is None:
            free[device] = free.get(device, 0.0) + float((end - start).sum())
            claimed[device] = (start, end)
            continue
        rest_start, rest_end = subtract_intervals(start, end, *taken)
        free[device] = free.get(device, 0.0) + float((rest_end - rest_start).sum())
        claimed[device] = merge_intervals(np.concatenate([taken[0], start]), np.concatenate([taken[1], end]))
    return free


def _available(left: dict[str, float], parts: list[str]) -> float:
    """What is left of ``parts`` (of the window when none is named), never more than the window."""
    return min(sum(left.get(p, 0.0) for p in parts) if parts else left["window_us"], left["window_us"])


def _spend(budgets: dict[str, dict[str, float]], key: str, parts: list[str], value: float) -> None:
    """Take ``value`` from the parts (in order) and the window of ``key``, and of the pooled budget too
    (or, for a pooled finding, of nothing more unless its spans say which devices' time it is: the devices'
    own budgets stay for device findings)."""
    for target in [key] if key == _ALL else [key, _ALL]:
        if target in budgets:
            _spend_from(budgets[target], parts, value)


def _spend_from(left: dict[str, float], parts: list[str], value: float) -> None:
    """Take ``value`` from the parts of one budget (in order) and from its window."""
    remaining = value
    for part in parts:
        take = min(left.get(part, 0.0), remaining)
        left[part] = left.get(part, 0.0) - take
        remaining -= take
    left["window_us"] = max(left["window_us"] - value, 0.0)
