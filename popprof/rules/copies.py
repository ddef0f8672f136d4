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
from ..metrics.copies import (
    COLUMNS,
    HOST_DIRECTIONS,
    PAGEABLE,
    PINNED,
    UNKNOWN,
    copy_records,
    exclusive_spans,
)
from ..model.profile import Profile
from ..trace.intervals import device_label
from .base import Finding, Gain, NotEvaluated, RuleContext, band, rule


@rule(
    "host.pageable-copies",
    "pageable host-memory copies: staged by the driver, overlapping no other work",
    needs=["events"],
    params={"warning": 0.05, "error": 0.3, "info": 0.001, "min_us": 1000.0, "top": 3},
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
    kinds = copy_records(profile)  # a few rows: plain Python, no frame until there is a finding
    host = [k for k in kinds if k["direction"] in HOST_DIRECTIONS]
    if not host:
        return []  # no copy between the host and a device: nothing to judge
    if all(k["memory"] == UNKNOWN for k in host):
        raise NotEvaluated(
            "needs copies whose name says which host memory (Kineto's 'Memcpy HtoD (Pageable -> Device)'); "
            "this trace's say only 'Host' (AMD's roctracer)"
        )
    pageable = [k for k in host if k["memory"] == PAGEABLE]
    if not pageable:
        return []
    windows = _windows(profile)
    per_device, shares, ranked = _by_device(pageable, windows)  # the pageable copies' part of the copies
    worst = ranked[0]
    share, exclusive = shares[worst], per_device[worst]
    severity, threshold = band(share, params["warning"], params["error"])
    if severity is None and share >= params["info"]:
        severity, threshold = "info", params["info"]
    if severity is None or exclusive < params["min_us"]:
        return []
    label = device_label(None if worst[0] < 0 else worst[0], worst[1])
    mine = [k for k in pageable if (-1 if k["rank"] is None else k["rank"], k["device"]) == worst]
    message = (
        f"{label + ': ' if label else ''}{_figures(mine, kinds)}; {units.duration(exclusive)} of it with no "
        f"compute or communication running (the time account's copies), {units.percent(share)} of its window "
        f"{units.duration(windows.get(worst))} ({severity} at >= {units.limit_percent(threshold)})"
    )
    message += _other_devices(ranked[1 : 1 + int(params["top"])], shares)
    spans = _spans_of(profile, {k["kind"] for k in pageable})
    gain = Gain(
        sum(per_device.values()),
        "us",
        "the pageable copies' part of the time account's copies (their time with no compute or communication "
        "running): the most that pinning their host memory and copying asynchronously, overlapped with "
        "kernels, could remove",
        whole=sum(windows.get(key) or 0.0 for key in per_device),
        rests_on=("copies",),
        spans=spans,
    )
    where: dict = {"kinds": sorted({k["kind"] for k in pageable})}
    if spans:
        where["devices"] = list(spans)
    return [
        ctx.finding(
            severity,
            "Copies from or to pageable host memory",
            message,
            value=share,
            threshold=threshold,
            where=where,
            evidence=pd.DataFrame(pageable, columns=COLUMNS),
            figure="copies.copies_us",
            share=share,
            gain=gain,
        )
    ]


def _by_device(
    kinds: list[dict], windows: dict[tuple[int, str], float]
) -> tuple[dict[tuple[int, str], float], dict[tuple[int, str], float], list[tuple[int, str]]]:
    """The kinds' part of the account's copies per (rank, -1 unknown; device), its share of each device's window,
    and the devices from the largest share (stable: rank and device order among equals)."""
    per_device: dict[tuple[int, str], float] = {}
    for k in kinds:
        key = (-1 if k["rank"] is None else k["rank"], k["device"])
        per_device[key] = per_device.get(key, 0.0) + k["copies_us"]
    shares = {key: value / windows[key] if windows.get(key) else 0.0 for key, value in per_device.items()}
    return per_device, shares, sorted(per_device, key=lambda key: -shares[key])


def _other_devices(others: list[tuple[int, str]], shares: dict[tuple[int, str], float]) -> str:
    """``; other devices: gpu:1 12.0 %, ...`` (nothing without any)."""
    if not others:
        return ""
    return "; other devices: " + ", ".join(
        f"{device_label(None if r < 0 else r, d)} {units.percent(shares[(r, d)])}" for r, d in others
    )


def _spans_of(profile: Profile, kinds: set[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per device label, the intervals of the account's copies that ``kinds`` hold (``metrics.copies``'
    :func:`~popprof.metrics.copies.exclusive_spans`), a gain's spans."""
    spans: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for (r, d, kind), (start, end) in exclusive_spans(profile).items():
        if kind in kinds and len(start):
            who = device_label(None if r < 0 else r, d)
            previous = spans.get(who)
            spans[who] = (start, end) if previous is None else _joined(previous, (start, end))
    return spans


def _windows(profile: Profile) -> dict[tuple[int, str], float]:
    """Each device's window in the time account, by (rank, -1 unknown; device)."""
    runs = run_account(profile)
    ranks = runs["rank"].to_numpy(dtype=np.float64, na_value=-1.0).astype(np.int64).tolist()
    devices = [str(d) for d in runs["device"].tolist()]
    return dict(zip(zip(ranks, devices, strict=True), runs["window_us"].astype(float).tolist(), strict=True))


def _figures(mine: list[dict], kinds: list[dict]) -> str:
    """ "N copies from or to pageable host memory (HtoD 12), B in T on the device (X GB/s; the run's pinned
    HtoD copies: Y GB/s)"."""
    count = sum(k["count"] for k in mine)
    parts = ", ".join(f"{k['direction']} {k['count']:,}" for k in mine)
    time = sum(k["time_us"] for k in mine)
    text = f"{plural(count, 'copy', 'copies')} from or to pageable host memory ({parts}), "
    if any(k["bytes"] is None for k in mine):
        return text + f"{units.duration(time)} on the device ({words.COPIES_NO_BYTES})"
    total = sum(k["bytes"] for k in mine)
    text += f"{units.bytes_short(total)} in {units.duration(time)} on the device"
    rate = units.bandwidth(total / (time * 1e3)) if time > 0 else units.MISSING
    directions = {k["direction"] for k in mine}
    pinned = [k for k in kinds if k["memory"] == PINNED and k["direction"] in directions]
    pinned_time = sum(k["time_us"] for k in pinned)
    if pinned and all(k["bytes"] is not None for k in pinned) and pinned_time > 0:
        which = "/".join(sorted({k["direction"] for k in pinned}))
        pinned_rate = sum(k["bytes"] for k in pinned) / (pinned_time * 1e3)
        rate += f"; the run's pinned {which} copies: {units.bandwidth(pinned_rate)}"
    return text + f" ({rate})"


def _joined(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Two sets of disjoint intervals as one, sorted (the pageable kinds' parts of a device never overlap)."""
    start, end = np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]])
    order = np.argsort(start, kind="stable")
    return start[order], end[order]


@rule(
    "host.device-copies",
    "host-device copies with nothing else running (the time account's copies), pageable ones left to "
    "host.pageable-copies",
    needs=["events"],
    params={"warning": 0.10, "error": 0.30, "min_us": 1000.0, "top": 3},
    advice={
        "ipu": "Not applicable to IPU programs: host.stream-copy judges their stream copies.",
        "gpu": "The device spends this time copying to or from the host with no kernel running beside the "
        "copies. Overlap them: copy from pinned memory with non_blocking=True on a stream of its own and "
        "prefetch the next batch while this one computes; and copy less: keep tensors on the device between "
        "steps, batch many small copies into one, avoid per-step .item()/.cpu().",
        "tpu": "The TPU waits in XLA's copy-done ops for asynchronous copies between host memory and HBM "
        "(host offloading: arrays placed in pinned_host memory, offloaded activations or optimizer state). "
        "Keep the arrays the steps read in HBM when they fit, start the copies earlier so they overlap "
        "compute, and move fewer bytes (a smaller dtype, only what the step needs).",
    },
)
def device_copies(profile: Profile, ctx: RuleContext) -> list[Finding]:
    params = ctx.params
    if ctx.platform != "gpu":
        raise NotEvaluated("needs a GPU or TPU trace with host-device copies (an IPU's: host.stream-copy)")
    kinds = copy_records(profile)
    mine = [k for k in kinds if k["direction"] in HOST_DIRECTIONS and k["memory"] != PAGEABLE]
    if not mine:
        return []  # no copy between the host and a device but pageable ones (host.pageable-copies)
    windows = _windows(profile)
    per_device, shares, ranked = _by_device(mine, windows)  # their part of the account's copies
    worst = ranked[0]
    share, exclusive = shares[worst], per_device[worst]
    severity, threshold = band(share, params["warning"], params["error"])
    if severity is None or exclusive < params["min_us"]:
        return []
    label = device_label(None if worst[0] < 0 else worst[0], worst[1])
    on_worst = [k for k in mine if (-1 if k["rank"] is None else k["rank"], k["device"]) == worst]
    message = (
        f"{label + ': ' if label else ''}host-device copies with no compute or communication running (the time "
        f"account's copies) take {units.duration(exclusive)}, {units.percent(share)} of its window "
        f"{units.duration(windows.get(worst))} ({severity} at >= {units.limit_percent(threshold)}); "
        f"{_kinds_words(on_worst)}"
    )
    message += _other_devices([key for key in ranked[1 : 1 + int(params["top"])] if shares[key] > 0], shares)
    kinds_of = {k["kind"] for k in mine}
    spans = _spans_of(profile, kinds_of)
    gain = Gain(
        sum(per_device.values()),
        "us",
        "these copies' part of the time account's copies (their time with no compute or communication "
        "running): the most that overlapping them with compute, or not copying, could remove",
        whole=sum(windows.get(key) or 0.0 for key in per_device),
        rests_on=("copies",),
        spans=spans,
    )
    where: dict = {"kinds": sorted(kinds_of)}
    if spans:
        where["devices"] = list(spans)
    return [
        ctx.finding(
            severity,
            "Device time in host-device copies",
            message,
            value=share,
            threshold=threshold,
            where=where,
            evidence=pd.DataFrame(mine, columns=COLUMNS),
            figure="copies.copies_us",
            share=share,
            gain=gain,
        )
    ]


def _kinds_words(kinds: list[dict]) -> str:
    """ "by kind: HtoD 300 copies, 1.2 GiB, 57.77 s on the device; DtoH ..." (bytes where the trace has them),
    the kind with the most device time first; copies are ``metrics.copies``' transfers, their ops said where
    they differ (a TPU's copy-start and copy-done: "HtoD 300 copies (600 XLA ops)")."""
    parts = []
    for k in sorted(kinds, key=lambda k: -k["time_us"]):
        memory = "" if k["memory"] == UNKNOWN else f" {k['memory']}"
        size = "" if k["bytes"] is None else f", {units.bytes_short(k['bytes'])}"
        ops = k.get("ops", k["count"])
        split = f" ({ops:,} XLA ops)" if ops != k["count"] else ""
        parts.append(
            f"{k['direction']}{memory} {plural(k['count'], 'copy', 'copies')}{split}{size}, "
            f"{units.duration(k['time_us'])} on the device"
        )
    return "by kind: " + "; ".join(parts)
