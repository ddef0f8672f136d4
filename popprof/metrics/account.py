"""The time account: one partition of each device's window into exclusive parts that sum to it.

Everything popprof says about where device time went reads this account (``docs/figures.md``, "The time
account"). For each device (per rank) and one stated window, every microsecond is in exactly one part:

GPU (Chrome / Kineto traces), parts taken in this order of precedence when several kinds of work overlap:

| part | the device was ... |
|---|---|
| ``compute`` | running a kernel that is not communication or a copy |
| ``communication`` | running communication (collectives, peer copies) and no compute: exposed communication |
| ``copies`` | copying or setting memory (host-device copies, memsets, on-device copies) and nothing above |
| ``idle_host`` | idle, and the work that ran next had not yet been submitted by the host (HTA's "host wait") |
| ``idle_launch`` | idle with its next work already submitted: launch latency, or waiting on a dependency |
|                 | (an event, another stream; the device's own sync events count here) |
| ``idle_other`` | idle, and what came next is not known (no launch recorded for it) |

IPU (``steps`` of profile.pop, SDK 1.x JSON or a bundle; ``.pvti`` device events; a text summary's totals):
``compute``, ``exchange``, ``global_exchange``, ``sync``, ``stream_copies`` (host I/O), ``other``, ``idle``.

Windows (``basis``):

- ``device_span``: a GPU or ``.pvti`` device's first to last activity, every step included (the run);
- ``step``: one ``ProfilerStep#N`` of the rank, clipped to nothing (idle before the step's first work is
  idle like any other);
- ``ipu_run``: the run on an IPU profile, the busiest IPU's step cycles / clock: an IPU that ran fewer
  cycles was idle for the difference;
- ``summary_total``: a Poplar text summary's Total cycles, with its parts as the average tile's cycles.

The idle split of a gap reads the launch of the work that ended it: the part of the gap before its launch
call started is ``idle_host``, the rest ``idle_launch``; a gap at a step's end with no more work of the
device in the trace is ``idle_host`` (the host submitted nothing more).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..io.words import IDLE_HOST
from ..model.errors import NotEvaluated
from ..model.profile import Profile
from ..trace import intervals as im
from ..trace import masks
from ..trace.spans import merge_intervals, subtract_intervals, touching
from . import metric, metric_family
from .ranks import step_times
from .trace import device_activity_mask

GPU_PARTS: tuple[str, ...] = (
    "compute",
    "communication",
    "copies",
    "idle_host",
    "idle_launch",
    "idle_other",
)
IPU_PARTS: tuple[str, ...] = (
    "compute",
    "exchange",
    "global_exchange",
    "sync",
    "stream_copies",
    "other",
    "idle",
)
#: Every part name, GPU's first; a platform's rows leave the other platform's parts missing.
PARTS: tuple[str, ...] = (*GPU_PARTS, *(p for p in IPU_PARTS if p not in GPU_PARTS))
#: The parts where the device ran work (the rest start with ``idle``).
BUSY_PARTS: tuple[str, ...] = tuple(p for p in PARTS if not p.startswith("idle"))
#: The communication part of each platform (GPU exposed communication; IPU exchange + global exchange).
COMMUNICATION_PARTS: dict[str, tuple[str, ...]] = {
    "gpu": ("communication",),
    "ipu": ("exchange", "global_exchange"),
}
#: The words text for people uses for each part (``docs/figures.md``, Glossary).
PART_WORDS: dict[str, str] = {
    "compute": "compute",
    "communication": "communication",
    "copies": "copies",
    "idle_host": IDLE_HOST,
    "idle_launch": "idle, launch or dependency",
    "idle_other": "idle, cause unknown",
    "exchange": "exchange",
    "global_exchange": "global exchange",
    "sync": "sync",
    "stream_copies": "stream copies",
    "other": "other",
    "idle": "idle",
}
COLUMNS = ["platform", "rank", "device", "step", "basis", "window_us", *PARTS]

#: What each basis means, in one sentence (the JSON's and the text's words).
BASIS_TEXT: dict[str, str] = {
    "device_span": "the device's first to last activity, every step included",
    "step": "one ProfilerStep of the rank",
    "ipu_run": "the run: the busiest IPU's step cycles / clock",
    "summary_total": "the summary's Total cycles; parts are the average tile's cycles",
}

# device_category -> the layer of a GPU device's timeline (earlier layers take precedence)
_GPU_LAYERS = (("compute",), ("exchange",), ("host_io", "other"), ("sync",))
_GPU_LAYER_PARTS = ("compute", "communication", "copies", "idle_launch")
_IPU_LAYERS = (("compute",), ("exchange",), ("sync",), ("host_io",), ("other",))
_IPU_LAYER_PARTS = ("compute", "exchange", "sync", "stream_copies", "other")


def time_account(profile: Profile, steps: bool = True) -> pd.DataFrame:
    """The time account of every device: one row per (rank, device) for the run (``step`` missing) and,
    with ``steps``, one per (rank, device, step) where the trace marks steps. Columns :data:`COLUMNS`; each
    row's parts sum to ``window_us`` (a platform's parts; the other platform's are missing). Empty when the
    profile holds no device time."""
    if not steps:
        return run_account(profile)
    return _built(profile)[0].copy()


def run_account(profile: Profile) -> pd.DataFrame:
    """The run rows of :func:`time_account` (one per device)."""
    return _run_rows(profile).copy()


def _run_rows(profile: Profile) -> pd.DataFrame:
    """The run rows of the account, kept once per profile (callers get copies: tables are mutable)."""

    def build() -> pd.DataFrame:
        frame = _built(profile)[0]
        return frame[frame["step"].isna()].reset_index(drop=True)

    return profile.cached("account.run_rows", build)


#: Columns of :func:`launch_gaps`.
LAUNCH_GAP_COLUMNS = [
    "rank",
    "device",
    "row",
    "call_row",
    "start_us",
    "end_us",
    "idle_host_us",
    "idle_launch_us",
]


def launch_gaps(profile: Profile) -> pd.DataFrame:
    """Each GPU gap that ended at launched work, inside its device's window (``device_span``), as the account
    splits it: ``rank``, ``device`` (as the account's rows), ``row`` (the events row of the work that ended
    the gap: of those starting there, the one launched first), ``call_row`` (the events row of its launch
    call), ``start_us`` and ``end_us`` (the gap, inside the window), ``idle_host_us`` (the part of the gap
    before that call started) and ``idle_launch_us`` (the part after). :mod:`popprof.metrics.launches`
    prices launches by it. The ``idle_launch_us`` per device sum to the device's ``idle_launch`` less the time
    of its sync events (which the account also counts there); the ``idle_host_us`` to its ``idle_host`` less
    the gaps that ended at work without a recorded launch and the one after its last work. Empty without GPU
    gaps."""
    return _built(profile)[1].copy()


def copies_spans(profile: Profile) -> dict[tuple[int, str], tuple[np.ndarray, np.ndarray]]:
    """Each GPU's ``copies`` part as sorted, disjoint intervals ``(starts, ends)``, keyed by (rank, -1 when
    unknown; device, as the account's rows name it); their lengths sum to the run row's ``copies``.
    :mod:`popprof.metrics.copies` splits them by copy kind. Empty without GPU copies. Read-only arrays."""
    return _built(profile)[2]


def _built(
    profile: Profile,
) -> tuple[pd.DataFrame, pd.DataFrame, dict[tuple[int, str], tuple[np.ndarray, np.ndarray]]]:
    """The account's rows (all windows), its launch gaps and its copies' intervals, built together once per
    profile."""
    return profile.cached("account.time_account", lambda: _account(profile))


def _account(
    profile: Profile,
) -> tuple[pd.DataFrame, pd.DataFrame, dict[tuple[int, str], tuple[np.ndarray, np.ndarray]]]:
    rows: list[dict] = []
    gaps: list[tuple[int | None, str, tuple[np.ndarray, ...]]] = []
    copies: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]] = {}
    events = profile.get("events")
    if events is not None and not events.empty and device_activity_mask(profile).any():
        rows = _trace_rows(profile, gaps, copies)
    elif profile.has("steps") and not profile.steps.empty:
        rows = _steps_rows(profile)
    elif profile.has("execution_totals") and not profile.execution_totals.empty:
        rows = _summary_rows(profile)
    # column by column: no frame of objects converted afterwards (an empty account keeps object columns)
    columns: dict[str, object] = {col: [row[col] for row in rows] for col in COLUMNS}
    if not rows:
        columns.update({col: np.array([], dtype=object) for col in ("platform", "device", "basis")})
    for col in ("rank", "step"):
        columns[col] = pd.array(columns[col], dtype="Int64")
    for col in ("window_us", *PARTS):
        columns[col] = np.array(columns[col], dtype=np.float64)
    return pd.DataFrame(columns, columns=COLUMNS), _gap_frame(gaps), copies


# -- traces -----------------------------------------------------------------


def _platform(events: pd.DataFrame) -> str:
    return "gpu" if "stream" in events.columns and events["stream"].notna().any() else "ipu"


def _launch_calls(profile: Profile, rows: np.ndarray) -> np.ndarray:
    """The events row of the host event with the same (rank, correlation) as each device event of ``rows``
    (the launch call; the last such host event when there are several), -1 where there is none.

    Keys are :func:`popprof.trace.masks.correlation_keys`. When each key names one host event (the
    usual case) the device events are looked up among the host's; else the wanted keys are hashed and every
    host event looked up among them, so the last one wins."""
    events = profile.events
    out = np.full(len(rows), -1, dtype=np.int64)
    if "correlation" not in events.columns or len(rows) == 0:
        return out
    has_correlation = events["correlation"].notna().to_numpy()
    ok = has_correlation[rows]
    if not ok.any():
        return out
    dev_keys = masks.correlation_keys(profile, rows[ok])
    host = ~device_activity_mask(profile) & ~masks.bookkeeping_mask(profile) & has_correlation
    host &= ~masks.stream_mask(profile)  # all false without a stream column
    host_rows = np.flatnonzero(host)
    if host_rows.size == 0:  # no launch call recorded (a device-only trace): no launch to look up
        return out
    host_keys = pd.Index(masks.correlation_keys(profile, host_rows))
    if host_keys.is_unique:  # the usual case: one launch call per correlation, looked up directly
        position = host_keys.get_indexer(dev_keys)
        out[ok] = np.where(position >= 0, host_rows[np.maximum(position, 0)], -1)
        return out
    wanted = pd.Index(pd.unique(dev_keys))
    position = wanted.get_indexer(host_keys)
    hit = position >= 0
    call = np.full(len(wanted), -1, dtype=np.int64)
    call[position[hit]] = host_rows[hit]  # the last wins
    out[ok] = call[wanted.get_indexer(dev_keys)]
    return out


class _Segments:
    """Sorted, disjoint labelled segments (label = index into ``parts``) with, per label present, the positions
    of its segments and the running sum of their lengths, for the time of each part inside any windows."""

    def __init__(self, start: np.ndarray, end: np.ndarray, label: np.ndarray, parts: tuple[str, ...]):
        self.start, self.end, self.label = start, end, label
        self.parts = parts
        length = end - start
        # a label's running sum over its own segments is the running sum over all with the others' left at 0
        # (adding 0.0 changes no sum): a few arrays as long as the label's segments, no table of them all
        self.runs: list[tuple[int, np.ndarray, np.ndarray]] = []
        for i in np.flatnonzero(np.bincount(label, minlength=len(parts))).tolist():  # the labels present
            at = np.flatnonzero(label == i)
            self.runs.append((i, at, np.cumsum(length[at])))

    def sums(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Time of each part inside each window ``[lo, hi]``: one row per window."""
        out = np.zeros((lo.size, len(self.parts)))
        if len(self.start) == 0:
            return out
        first = np.searchsorted(self.end, lo, side="right")
        last = np.searchsorted(self.start, hi, side="left")  # segments [first, last) overlap
        ok = (hi > lo) & (last > first)
        for i, at, total in self.runs:
            out[:, i] = np.where(ok, _time_before(at, total, last) - _time_before(at, total, first), 0.0)
        # trim the two edge segments to the window (max(0, ...) as Python's: 0.0 unless above it)
        w = np.flatnonzero(ok)
        head, tail = first[w], last[w] - 1
        cut = lo[w] - self.start[head]
        out[w, self.label[head]] -= np.where(cut > 0.0, cut, 0.0)
        cut = self.end[tail] - hi[w]
        out[w, self.label[tail]] -= np.where(cut > 0.0, cut, 0.0)
        return out


def _time_before(at: np.ndarray, total: np.ndarray, k: np.ndarray) -> np.ndarray:
    """One label's time in the segments before position ``k``: its running sum ``total`` at its last segment
    (positions ``at``, at least one) before ``k``; 0 without one."""
    n = np.searchsorted(at, k)
    return np.where(n > 0, total[np.maximum(n - 1, 0)], 0.0)


class _Timeline:
    """A device's timeline over ``[lo, hi]``: its busy segments and its idle pieces, together without holes."""

    def __init__(self, busy: _Segments, idle: _Segments, launched: tuple[np.ndarray, ...] | None = None):
        self.busy, self.idle = busy, idle
        #: GPU: each gap that ended at launched work: (its start, where its launch call started, its end,
        #: the events row of that work, of its launch call)
        self.launched = launched

    def sums(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Time of each part inside each window ``[lo, hi]``: one row per window."""
        return self.busy.sums(lo, hi) + self.idle.sums(lo, hi)


def _layered_segments(
    start: np.ndarray, end: np.ndarray, layer: np.ndarray, layers: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Busy segments of the device in time order, each labelled with the first layer (lowest index) running
    in it: each layer's merged intervals less those of the layers before it, touching pieces of one layer
    one segment. Only the earlier layers' intervals that touch a layer's are read for it (a few exchanges
    among 100k kernels: a few intervals to subtract, no sweep over every kernel)."""
    merged = [merge_intervals(start[layer == i], end[layer == i]) for i in range(layers)]
    starts, ends, labels = [], [], []
    for i, (s, e) in enumerate(merged):
        if not s.size:
            continue
        above = [(bs[near], be[near]) for bs, be in merged[:i] if (near := touching(bs, be, s, e)).any()]
        if above:
            s, e = subtract_intervals(
                s,
                e,
                *merge_intervals(
                    np.concatenate([a[0] for a in above]), np.concatenate([a[1] for a in above])
                ),
            )
        real = e > s  # a zero-length piece is no segment
        starts.append(s[real])
        ends.append(e[real])
        labels.append(np.full(int(real.sum()), i, dtype=np.int64))
    if not starts:
        empty = np.empty(0)
        return empty, empty, np.empty(0, dtype=np.int64)
    seg_start, seg_end, label = np.concatenate(starts), np.concatenate(ends), np.concatenate(labels)
    order = np.argsort(seg_start, kind="stable")  # disjoint: no two segments start together
    return seg_start[order], seg_end[order], label[order]


def _layer_of_codes(category: pd.Categorical, layers: tuple[tuple[str, ...], ...]) -> np.ndarray:
    """The layer of each event by its category code (a lookup per category, none per event); categories in
    no layer, and a missing one, go to the last layer."""
    lut = np.full(len(category.categories) + 1, len(layers) - 1, dtype=np.int64)
    for i, members in enumerate(layers):
        for j, name in enumerate(category.categories):
            if str(name) in members:
                lut[j] = i
    return lut[np.asarray(category.codes)]  # code -1 takes the lut's last entry


def _device_timeline(
    profile: Profile, activity: im.DeviceActivity, platform: str, lo: float, hi: float
) -> _Timeline:
    """The labelled timeline of one device over ``[lo, hi]`` (which holds its activity)."""
    gpu = platform == "gpu"
    layers = _GPU_LAYERS if gpu else _IPU_LAYERS
    layer_parts = _GPU_LAYER_PARTS if gpu else _IPU_LAYER_PARTS
    parts = GPU_PARTS if gpu else IPU_PARTS
    layer = _layer_of_codes(activity.category, layers)
    s, e, lab = _layered_segments(activity.start, activity.end, layer, len(layers))
    seg_label = np.array([parts.index(layer_parts[i]) for i in range(len(layers))], dtype=np.int64)[lab]
    busy = _Segments(s, e, seg_label, parts)
    # the idle gaps between busy segments, and before / after them inside [lo, hi], in time order
    merged_start, merged_end = merge_intervals(s, e)
    gap_start = np.concatenate([[lo], merged_end])
    gap_end = np.concatenate([merged_start, [hi]])
    open_end = np.zeros(gap_start.size, dtype=bool)
    open_end[-1] = True  # after the last work: nothing of the device comes next
    real = gap_end > gap_start
    gap_start, gap_end, open_end = gap_start[real], gap_end[real], open_end[real]
    if not gpu:
        idle = np.full(gap_start.size, parts.index("idle"), dtype=np.int64)
        return _Timeline(busy, _Segments(gap_start, gap_end, idle, parts))
    # GPU: the launch of the work that ended each gap splits it into host-bound and launch/dependency time
    next_launch, work, call = _gap_launches(profile, activity, gap_end)
    known = ~np.isnan(next_launch) & ~open_end
    cut = np.clip(next_launch, gap_start, gap_end)
    host_end = np.where(open_end, gap_end, np.where(known, cut, gap_start))
    # each gap as two pieces, host-bound first: interleaved, they stay in time order
    piece_start = np.column_stack([gap_start, host_end]).ravel()
    piece_end = np.column_stack([host_end, gap_end]).ravel()
    after = np.where(known, parts.index("idle_launch"), parts.index("idle_other"))
    host = np.full(gap_start.size, parts.index("idle_host"))
    piece_label = np.column_stack([host, after]).ravel().astype(np.int64)
    nonempty = piece_end > piece_start
    launched = (gap_start[known], cut[known], gap_end[known], work[known], call[known])
    return _Timeline(
        busy, _Segments(piece_start[nonempty], piece_end[nonempty], piece_label[nonempty], parts), launched
    )


def _gap_launches(
    profile: Profile, activity: im.DeviceActivity, gap_end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each gap, the earliest launch among the device's work items starting where the gap ends: its
    start (NaN when none of them has a recorded launch), the events row of that work and of its launch call
    (-1 when none)."""
    start = np.full(gap_end.size, np.nan)
    work = np.full(gap_end.size, -1, dtype=np.int64)
    call = np.full(gap_end.size, -1, dtype=np.int64)
    if activity.rows is None or gap_end.size == 0:
        return start, work, call
    # gap ends are strictly increasing (one per merged busy segment, then the window's end): a binary search
    found = np.minimum(np.searchsorted(gap_end, activity.start), gap_end.size - 1)
    gap_of = np.where(gap_end[found] == activity.start, found, -1)
    hit = np.flatnonzero(gap_of >= 0)
    if hit.size == 0:
        return start, work, call
    calls = _launch_calls(profile, activity.rows[hit])
    ok = calls >= 0
    hit, calls = hit[ok], calls[ok]
    if hit.size == 0:  # none of them has a recorded launch
        return start, work, call
    launch = profile.events["start_us"].to_numpy(dtype=np.float64)[calls]
    gaps = gap_of[hit]
    np.fmin.at(start, gaps, launch)  # the earliest launch of each gap
    earliest = np.flatnonzero(launch == start[gaps])  # of the work launched then, the first listed
    chosen = np.full(gap_end.size, hit.size, dtype=np.int64)
    np.minimum.at(chosen, gaps[earliest], earliest)
    has = chosen < hit.size
    work[has] = activity.rows[hit[chosen[has]]]
    call[has] = calls[chosen[has]]
    return start, work, call


def _row(platform: str, rank, device, step, basis: str, window: float, sums: dict[str, float]) -> dict:
    row = {
        "platform": platform,
        "rank": rank,
        "device": device,
        "step": step,
        "basis": basis,
        "window_us": window,
    }
    for part in PARTS:
        row[part] = sums.get(part, math.nan)
    return row


def _trace_rows(
    profile: Profile,
    gaps: list[tuple[int | None, str, tuple[np.ndarray, ...]]],
    copies: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]],
) -> list[dict]:
    """The account's rows of a trace's devices; appends each GPU's launch gaps (:func:`launch_gaps`) to
    ``gaps`` and puts each GPU's copies part (:func:`copies_spans`) in ``copies``."""
    events = profile.events
    try:
        activities = im.device_activities(profile, by="device")
    except NotEvaluated:
        return []
    platform = _platform(events)
    parts = GPU_PARTS if platform == "gpu" else IPU_PARTS
    marks = step_times(profile)
    rows: list[dict] = []
    for act in activities:
        if act.start.size == 0:
            continue
        first, last = float(act.start.min()), float(act.end.max())
        rank = act.rank if act.rank is not None else None
        mine = marks[marks["rank"] == (-1 if rank is None else rank)] if not marks.empty else marks
        windows = _step_windows(mine)
        lo = min([first, *(w[1] for w in windows)])
        hi = max([last, *(w[2] for w in windows)])
        timeline = _device_timeline(profile, act, platform, lo, hi)
        device = act.device or ("gpu" if platform == "gpu" else "ipu")
        if timeline.launched is not None:
            gaps.append((rank, device, _launched_in(timeline.launched, first, last)))
        if platform == "gpu":
            busy = timeline.busy
            mine = busy.label == parts.index("copies")
            if mine.any():  # the busy segments lie inside [first, last]: the run row's copies exactly
                spans = (busy.start[mine], busy.end[mine])
                for array in spans:
                    array.setflags(write=False)
                copies[(-1 if rank is None else int(rank), device)] = spans
        # the device's span and each step in one call: a row of sums per window
        sums = timeline.sums(
            np.array([first, *(w[1] for w in windows)]), np.array([last, *(w[2] for w in windows)])
        )
        rows.append(
            _row(
                platform,
                rank,
                device,
                None,
                "device_span",
                last - first,
                dict(zip(parts, sums[0], strict=True)),
            )
        )
        for (step, a, b), window_sums in zip(windows, sums[1:], strict=True):
            rows.append(
                _row(platform, rank, device, step, "step", b - a, dict(zip(parts, window_sums, strict=True)))
            )
    return rows


def _launched_in(launched: tuple[np.ndarray, ...], first: float, last: float) -> tuple[np.ndarray, ...]:
    """The launch gaps of one device inside its window ``[first, last]``: (work row, call row, start, end,
    host part, launch part)."""
    start, cut, end, work, call = launched
    host = np.clip(np.minimum(cut, last) - np.maximum(start, first), 0.0, None)
    launch = np.clip(np.minimum(end, last) - np.maximum(cut, first), 0.0, None)
    keep = (host > 0) | (launch > 0)
    inside = np.maximum(start, first)[keep], np.minimum(end, last)[keep]
    return work[keep], call[keep], *inside, host[keep], launch[keep]


def _gap_frame(gaps: list[tuple[int | None, str, tuple[np.ndarray, ...]]]) -> pd.DataFrame:
    """The launch gaps of every device as one table (:data:`LAUNCH_GAP_COLUMNS`), built once."""
    sizes = np.array([len(g[2][0]) for g in gaps], dtype=np.int64)
    labels = list(dict.fromkeys(device for _, device, _ in gaps))
    rank = np.repeat(np.array([-1 if r is None else r for r, _, _ in gaps], dtype=np.int64), sizes)
    code = np.repeat(np.array([labels.index(device) for _, device, _ in gaps], dtype=np.int64), sizes)
    parts = [np.concatenate([g[2][i] for g in gaps]) if gaps else np.array([]) for i in range(6)]
    return pd.DataFrame(
        {
            "rank": pd.arrays.IntegerArray(np.maximum(rank, 0), rank < 0),
            "device": pd.Categorical.from_codes(code, categories=labels),
            "row": parts[0].astype(np.int64),
            "call_row": parts[1].astype(np.int64),
            "start_us": parts[2].astype(np.float64),
            "end_us": parts[3].astype(np.float64),
            "idle_host_us": parts[4].astype(np.float64),
            "idle_launch_us": parts[5].astype(np.float64),
        }
    )


def _step_windows(marks: pd.DataFrame) -> list[tuple[int, float, float]]:
    """``(step, start, end)`` of each step of one rank: the earliest start and latest end of its markers."""
    if marks.empty:
        return []
    start = marks["start_us"].to_numpy(dtype=np.float64)
    end = start + marks["dur_us"].to_numpy(dtype=np.float64)
    steps, group = np.unique(marks["step"].to_numpy(dtype=np.int64), return_inverse=True)  # a few markers
    lo, hi = np.full(steps.size, np.nan), np.full(steps.size, np.nan)
    np.fmin.at(lo, group, start)  # fmin / fmax pass over NaN, as a grouped min / max does
    np.fmax.at(hi, group, end)
    return [(int(s), float(a), float(b)) for s, a, b in zip(steps, lo, hi, strict=True) if b > a]


# -- IPU steps and text summaries --------------------------------------------

_STEP_PARTS = {
    "compute": "compute",
    "exchange": "exchange",
    "global_exchange": "global_exchange",
    "sync": "sync",
    "host_io": "stream_copies",
    "other": "other",
}

#: Which part of the account a device category's work fills, by platform: a GPU's by its timeline's layers (the
#: part its time goes to when no work of a higher layer runs then), an IPU's by its steps' category (any other
#: category: ``other``). The diff's "What changed" names the events or programs of a part by it.
CATEGORY_PARTS: dict[str, dict[str, str]] = {
    "gpu": {cat: part for cats, part in zip(_GPU_LAYERS, _GPU_LAYER_PARTS, strict=True) for cat in cats},
    "ipu": dict(_STEP_PARTS),
}


def _steps_rows(profile: Profile) -> list[dict]:
    steps = profile.steps
    clock = profile.target_value("clock_hz")
    if clock is None or pd.isna(clock) or float(clock) <= 0 or not steps["cycles"].notna().any():
        return []
    scale = 1e6 / float(clock)
    cycles = steps["cycles"].fillna(0).astype("float64")
    table = cycles.groupby([steps["ipu"], steps["category"].astype("str")]).sum().unstack(fill_value=0.0)
    window = float(table.sum(axis=1).max()) * scale
    rows = []
    for ipu, by_cat in table.iterrows():
        sums = {part: 0.0 for part in IPU_PARTS}
        for cat, value in by_cat.items():
            sums[_STEP_PARTS.get(str(cat), "other")] += float(value) * scale
        sums["idle"] = max(window - sum(sums.values()), 0.0)
        rows.append(_row("ipu", None, f"ipu:{int(ipu)}", None, "ipu_run", window, sums))
    return rows


def _summary_rows(profile: Profile) -> list[dict]:
    totals = profile.execution_totals
    total_rows = totals[totals["category"].astype(str) == "total"]
    if total_rows.empty or pd.isna(total_rows["cycles"].iloc[0]) or not total_rows["cycles"].iloc[0]:
        return []
    total = float(total_rows["cycles"].iloc[0])
    clock = profile.target_value("clock_hz")
    printed = total_rows["time_us"].iloc[0] if "time_us" in total_rows.columns else math.nan
    if clock is not None and not pd.isna(clock) and float(clock) > 0:
        scale = 1e6 / float(clock)
    elif not pd.isna(printed) and printed > 0:
        scale = float(printed) / total  # the summary's own "approx N microseconds"
    else:
        return []
    window = total * scale
    sums = {part: 0.0 for part in IPU_PARTS}
    remaining = total
    for cat, part in _STEP_PARTS.items():
        mine = totals[totals["category"].astype(str) == cat]
        if mine.empty or pd.isna(mine["cycles"].iloc[0]):
            continue
        value = float(mine["cycles"].iloc[0])
        if value > total:  # SDK 1.x prints host exchange summed over tiles: not a part of the total
            continue
        value = min(value, remaining)
        sums[part] = value * scale
        remaining -= value
    sums["idle"] = max(window - sum(sums.values()), 0.0)
    return [_row("ipu", None, "ipu", None, "summary_total", window, sums)]


# -- figures read off the account ----------------------------------------------


def busy_us(row: pd.Series | dict) -> float:
    """A row's busy time: the sum of its parts that are not idle."""
    return float(sum(float(row[p]) for p in BUSY_PARTS if not pd.isna(row[p])))


def idle_us(row: pd.Series | dict) -> float:
    """A row's idle time: the sum of its ``idle*`` parts."""
    return float(sum(float(row[p]) for p in PARTS if p.startswith("idle") and not pd.isna(row[p])))


def communication_us(row: pd.Series | dict) -> float:
    """A row's communication time (GPU: exposed communication; IPU: exchange + global exchange)."""
    names = COMMUNICATION_PARTS.get(str(row["platform"]), ())
    return float(sum(float(row[p]) for p in names if not pd.isna(row[p])))


def pooled(profile: Profile) -> dict[str, float] | None:
    """The run rows pooled over devices: ``window_us`` and every part summed; None without an account."""
    total = profile.cached("account.pooled", lambda: _pooled(profile))
    return None if total is None else dict(total)


def _pooled(profile: Profile) -> dict[str, float] | None:
    runs = _run_rows(profile)
    if runs.empty:
        return None
    out = {"window_us": float(runs["window_us"].sum())}
    table = runs[list(PARTS)].to_numpy(dtype=np.float64)  # one array, not a Series per part
    for i, part in enumerate(PARTS):
        values = table[:, i][~np.isnan(table[:, i])]  # dropna(): the sum of the values present
        if values.size:
            out[part] = float(values.sum())
    return out


def shares(profile: Profile) -> dict[str, float] | None:
    """Busy, idle and communication shares of the pooled run window (``trace.device_*_share`` and
    ``device.*_share`` of the registry); None without an account."""
    total = pooled(profile)
    if total is None or total["window_us"] <= 0:
        return None
    window = total["window_us"]
    runs = _run_rows(profile)
    comm = float(sum(communication_us(r) for _, r in runs.iterrows()))
    idle = sum(v for k, v in total.items() if k.startswith("idle"))
    return {
        "busy": min(max(1.0 - idle / window, 0.0), 1.0),
        "idle": min(idle / window, 1.0),
        "communication": min(comm / window, 1.0),
    }


def to_records(profile: Profile, steps: bool = True) -> list[dict]:
    """The account as JSON-ready rows ``{platform, rank, device, step, basis, window_us, parts}`` (the
    parts of the row's platform, in order)."""
    frame = time_account(profile, steps=steps)
    out = []
    for row in frame.to_dict("records"):
        names = GPU_PARTS if row["platform"] == "gpu" else IPU_PARTS
        out.append(
            {
                "platform": row["platform"],
                "rank": None if pd.isna(row["rank"]) else int(row["rank"]),
                "device": row["device"],
                "step": None if pd.isna(row["step"]) else int(row["step"]),
                "basis": row["basis"],
                "window_us": float(row["window_us"]),
                "parts": {p: float(row[p]) for p in names},
            }
        )
    return out


@metric_family(
    "account.",
    "us",
    "the time account's parts of the run, summed over devices (``account.window_us``, "
    "``account.compute_us``, ``account.idle_host_us``, ...; docs/figures.md)",
    better=None,
)
def account_parts(profile: Profile) -> dict[str, float]:
    total = pooled(profile)
    if total is None:
        return {}
    return {f"{name.removesuffix('_us')}_us": value for name, value in total.items()}


@metric(
    "trace.device_busy_us",
    "us",
    "time the devices ran work, summed over devices, each over its own window (the time account's busy parts)",
    needs=("events",),
    better=None,
)
def device_busy_us(profile: Profile) -> float | None:
    total = pooled(profile)
    return None if total is None else sum(total.get(p, 0.0) for p in BUSY_PARTS)


@metric(
    "trace.device_idle_share",
    "share",
    "share of the devices' windows (each device's first to last activity, every step included: the time "
    "account's run window) with no device work running, pooled over devices",
    needs=("events",),
)
def device_idle_share(profile: Profile) -> float | None:
    figures = shares(profile)
    return None if figures is None else figures["idle"]


@metric(
    "trace.device_communication_share",
    "share",
    "share of the devices' windows (the time account's run window) in communication not overlapped by "
    "compute (GPU) or in exchange (IPU), pooled over devices",
    needs=("events",),
)
def device_communication_share(profile: Profile) -> float | None:
    figures = shares(profile)
    return None if figures is None else figures["communication"]


@metric(
    "trace.device_idle_us",
    "us",
    "time the devices ran no work inside their windows, summed over devices (the time account's idle parts)",
    needs=("events",),
)
def host_stall_us(profile: Profile) -> float | None:
    total = pooled(profile)
    return None if total is None else sum(v for k, v in total.items() if k.startswith("idle"))
