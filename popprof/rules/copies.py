"""Pageable-copies rule: copies from or to pageable host memory, which the driver stages and which do not overlap.

Nsight Systems' expert-system rule on asynchronous memcpy with pageable memory, on a Kineto trace: CUDA copies a
pageable host buffer through a pinned staging buffer of the driver's, so a ``cudaMemcpyAsync`` from or to it
runs synchronously with the host and overlaps nothing; pinned (page-locked) memory lets the copy engine run it
asynchronously beside kernels. The figures are :mod:`popprof.metrics.copies`: the copies whose name says
``Pageable`` (``Memcpy HtoD (Pageable -> Device)``, ``Memcpy DtoH (Device -> Pageable)``), their count, bytes,
device time and achieved GB/s against the same run's pinned copies, and their part of the time account's
``copies`` (copy time with no compute or communication running: ``copies_us``), which the rule judges and
prices.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..io import units, words
from ..io.plural import plural
from ..metrics.account import run_account
from ..metrics.copies import PAGEABLE, PINNED, UNKNOWN, copy_kinds, exclusive_spans
from ..model.profile import Profile
from ..trace.intervals import device_label
from .base import Finding, Gain, NotEvaluated, RuleContext, band, rule


@rule(
    "host.pageable-copies",
    "pageable host-memory copies: staged by the driver, overlapping no other work",
    needs=["events"],
    params={"warning": 0.01, "error": 0.10, "info": 0.001, "min_us": 1000.0, "top": 3},
    advice={
        "ipu": "Not applicable to IPU programs (their stream copies are the program's own host exchanges).",
        "gpu": "Copies from or to pageable host memory go through a staging buffer of the driver: the host "
        "waits for them and they overlap nothing. Allocate the host side pinned (page-locked): "
        "DataLoader(pin_memory=True), tensor.pin_memory(), torch.empty(..., pin_memory=True) for outputs "
        "copied back, then copy with .to(device, non_blocking=True) (or .cuda(non_blocking=True)) so the copy "
        "runs on the copy engine beside kernels; keep small per-step scalars on the device instead of "
        "copying them back (.item() each step).",
    },
)
def pageable_copies(profile: Profile, ctx: RuleContext) -> list[Finding]:
    params = ctx.params
    if ctx.platform != "gpu":
        raise NotEvaluated("needs a GPU trace with host-device copies (Kineto's Memcpy events)")
    kinds = copy_kinds(profile)
    host = kinds[kinds["direction"].isin(["HtoD", "DtoH", "HtoH"])]
    if host.empty:
        return []  # no copy between the host and a device: nothing to judge
    if (host["memory"] == UNKNOWN).all():
        raise NotEvaluated(
            "needs copies whose name says which host memory (Kineto's 'Memcpy HtoD (Pageable -> Device)'); "
            "this trace's say only 'Host' (AMD's roctracer)"
        )
    pageable = host[host["memory"] == PAGEABLE]
    if pageable.empty:
        return []
    runs = run_account(profile)
    windows = {
        (-1 if pd.isna(r.rank) else int(r.rank), str(r.device)): float(r.window_us)
        for r in runs.itertuples(index=False)
    }
    rank = pageable["rank"].astype("Float64").fillna(-1).astype(int)
    per_device = (
        pageable.assign(rank=rank.to_numpy())
        .groupby(["rank", "device"], sort=True)
        .agg(count=("count", "sum"), time_us=("time_us", "sum"), copies_us=("copies_us", "sum"))
        .reset_index()
    )
    per_device["window_us"] = [
        windows.get((r, d), np.nan) for r, d in zip(per_device["rank"], per_device["device"], strict=True)
    ]
    per_device["share"] = per_device["copies_us"] / per_device["window_us"]
    per_device = per_device.sort_values("share", ascending=False, kind="stable").reset_index(drop=True)
    worst = per_device.iloc[0]
    share, exclusive = float(worst["share"]), float(worst["copies_us"])
    severity, threshold = band(share, params["warning"], params["error"])
    if severity is None and share >= params["info"]:
        severity, threshold = "info", params["info"]
    if severity is None or exclusive < params["min_us"]:
        return []
    label = device_label(None if worst["rank"] < 0 else int(worst["rank"]), worst["device"])
    mine = pageable[(rank.to_numpy() == worst["rank"]) & (pageable["device"] == worst["device"]).to_numpy()]
    message = (
        f"{label + ': ' if label else ''}{_figures(mine, kinds)}; {units.duration(exclusive)} of it with no "
        f"compute or communication running (the time account's copies), {units.percent(share)} of its window "
        f"{units.duration(float(worst['window_us']))} ({severity} at >= {units.limit_percent(threshold)})"
    )
    others = per_device.iloc[1 : 1 + int(params["top"])]
    if len(others):
        message += "; other devices: " + ", ".join(
            f"{device_label(None if r < 0 else int(r), d)} {units.percent(s)}"
            for r, d, s in zip(others["rank"], others["device"], others["share"], strict=True)
        )
    spans, devices = {}, []
    for (r, d, kind), (start, end) in exclusive_spans(profile).items():
        if kind.endswith(f" {PAGEABLE}") and len(start):
            who = device_label(None if r < 0 else r, d)
            devices.append(who)
            previous = spans.get(who)
            spans[who] = (start, end) if previous is None else _joined(previous, (start, end))
    value = float(per_device["copies_us"].sum())
    whole = float(per_device["window_us"].sum())
    gain = Gain(
        value,
        "us",
        "the pageable copies' part of the time account's copies (their time with no compute or communication "
        "running): the most that pinning their host memory and copying asynchronously, overlapped with "
        "kernels, could remove",
        whole=whole,
        rests_on=("copies",),
        spans=spans,
    )
    where: dict = {"kinds": sorted(set(pageable["kind"]))}
    if devices:
        where["devices"] = sorted(set(devices), key=devices.index)
    return [
        ctx.finding(
            severity,
            "Copies from or to pageable host memory",
            message,
            value=share,
            threshold=threshold,
            where=where,
            evidence=pageable.reset_index(drop=True),
            figure="copies.copies_us",
            share=share,
            gain=gain,
        )
    ]


def _figures(mine: pd.DataFrame, kinds: pd.DataFrame) -> str:
    """ "N copies from or to pageable host memory (HtoD 12), B in T on the device (X GB/s; the run's pinned
    HtoD copies: Y GB/s)"."""
    count = int(mine["count"].sum())
    parts = ", ".join(
        f"{k.split(' ')[0]} {int(c):,}" for k, c in zip(mine["kind"], mine["count"], strict=True)
    )
    time = float(mine["time_us"].sum())
    text = f"{plural(count, 'copy', 'copies')} from or to pageable host memory ({parts}), "
    size = mine["bytes"].to_numpy(dtype=np.float64)
    if np.isnan(size).any():
        return text + f"{units.duration(time)} on the device (" + words.COPIES_NO_BYTES + ")"
    total = float(size.sum())
    text += f"{units.bytes_short(total)} in {units.duration(time)} on the device"
    rate = units.bandwidth(total / (time * 1e3)) if time > 0 else units.MISSING
    pinned = kinds[(kinds["memory"] == PINNED) & kinds["direction"].isin(set(mine["direction"]))]
    pinned_bytes = pinned["bytes"].to_numpy(dtype=np.float64)
    pinned_time = float(pinned["time_us"].sum())
    if len(pinned) and not np.isnan(pinned_bytes).any() and pinned_time > 0:
        directions = "/".join(sorted(set(pinned["direction"])))
        rate += f"; the run's pinned {directions} copies: {units.bandwidth(pinned_bytes.sum() / (pinned_time * 1e3))}"
    return text + f" ({rate})"


def _joined(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Two sets of disjoint intervals as one, sorted (the pageable kinds' parts of a device never overlap)."""
    start, end = np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]])
    order = np.argsort(start, kind="stable")
    return start[order], end[order]
