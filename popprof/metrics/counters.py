"""Hardware counters of a CUPTI range-profiler trace, per kernel and per operator (HTA's counter analysis).

PyTorch's profiler in CUPTI's range-profiler mode (``torch.profiler._ExperimentalConfig(profiler_metrics=[...],
profiler_measure_per_kernel=True)``) replays each kernel under the counters asked for and writes one
``cuda_profiler_range`` event per kernel, the counters in its ``args`` (``smsp__sass_thread_inst_executed_op_ffma_
pred_on.sum``: ...). Such an event carries no correlation id, so, as HTA 0.5.0's ``get_cupti_counter_data_with_
operators`` does, the k-th range of a rank (in time order) is the k-th ``cudaLaunchKernel*`` call of that rank, and
only when the two counts are equal; the kernel's operators are the framework operators above that call
(:data:`OPERATOR_CHANNELS`), outermost first: ``top_level_op`` and ``bottom_level_op`` are the first and the last.

The ranges' times are the profiler's, not the run's (each range as long as the others, back to back on one
track: 77 ranges of 121.43 ms in HTA's test trace), so the time figures of such a trace describe the profiling,
and :func:`replay_section` says so wherever the summary shows the time account.

FLOPs from the SASS counters follow HTA's weights (``CUDA_SASS_INSTRUCTION_COUNTER_FLOPS``) and Nsight Compute's
roofline: a fused multiply-add is two operations, an add or a multiply one, per thread instruction executed with
its predicate on; ``h``/``f``/``d`` are FP16, FP32 and FP64. They count the CUDA cores' instructions only: a
tensor-core GEMM (``hmma``, ``tf32``) does most of its work outside them, so its SASS FLOPs are a floor.

The registry holds the run's totals (``baseline``, ``diff``, the gate, ``trend``), read from :func:`kernel_counters`:
``counters.kernels``, ``counters.sass_flops`` and per precision ``counters.sass_flops.<precision>``, and
``counters.total.<counter>`` for each counter that adds up over kernels (:func:`additive`: a name ending in
``.sum``). All are neutral (``better`` None): more FLOPs or bytes for the same work is not worse by itself, and a
budget on a neutral figure fails on a change either way. None (no members) without range-profiler kernels or
when the trace was read without args.
"""

from __future__ import annotations

import numpy as np
import orjson
import pandas as pd

from ..model.profile import Profile
from ..trace import masks
from ..trace.activity import OPERATOR_CHANNELS, labels_mask
from . import metric, metric_family
from .trace import parent_rows

#: Kineto's category of a CUPTI range-profiler kernel range.
RANGE_CHANNEL = "cuda_profiler_range"
#: The launch calls a range is paired with, by prefix (HTA: ``s_name.str.match("cudaLaunchKernel")``).
LAUNCH_PREFIX = "cudaLaunchKernel"
#: Each SASS floating-point instruction counter: (operations per thread instruction, precision).
SASS_FLOP_COUNTERS: dict[str, tuple[int, str]] = {
    f"smsp__sass_thread_inst_executed_op_{kind}{op}_pred_on.sum": (2 if op == "fma" else 1, precision)
    for kind, precision in (("h", "fp16"), ("f", "fp32"), ("d", "fp64"))
    for op in ("fma", "mul", "add")
}
#: The precisions of :data:`SASS_FLOP_COUNTERS`, in the order shown.
PRECISIONS = ("fp16", "fp32", "fp64")
#: Columns of :func:`kernel_counters` before the counters.
KERNEL_COLUMNS = ["rank", "name", "start_us", "launch_row", "op_stack", "top_level_op", "bottom_level_op"]


def range_rows(profile: Profile) -> np.ndarray:
    """Row positions of the profile's ``cuda_profiler_range`` events (empty when there are none)."""
    events = profile.get("events")
    if events is None or events.empty or "channel" not in events.columns:
        return np.empty(0, dtype=np.int64)
    return np.flatnonzero(labels_mask(events["channel"], (RANGE_CHANNEL,)))


def _counters(texts: list[object]) -> pd.DataFrame:
    """The numeric fields of each range's args (JSON text), one column per counter in first-seen order."""
    rows = []
    for text in texts:
        try:
            value = orjson.loads(text) if isinstance(text, str) else {}
        except orjson.JSONDecodeError:
            value = {}
        value = value if isinstance(value, dict) else {}
        rows.append(
            {k: float(v) for k, v in value.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        )
    return pd.DataFrame(rows, index=range(len(rows)), dtype=np.float64)


def _launch_pairs(profile: Profile, ranges: np.ndarray) -> np.ndarray:
    """Each range's launch call row (-1 where its rank has not as many ``cudaLaunchKernel*`` calls as ranges)."""
    events = profile.events
    names = pd.Categorical(events["name"])  # the readers' categorical as it is, any other column coded once
    launch_codes = [i for i, c in enumerate(names.categories) if str(c).startswith(LAUNCH_PREFIX)]
    launches = np.flatnonzero(np.isin(np.asarray(names.codes), launch_codes))
    rank = masks.rank_array(profile)
    start = events["start_us"].to_numpy(dtype=np.float64)
    out = np.full(len(ranges), -1, dtype=np.int64)
    for r in np.unique(rank[ranges]):
        mine = np.flatnonzero(rank[ranges] == r)
        calls = launches[rank[launches] == r]
        if len(calls) != len(mine):
            continue
        # both in time order (ties in file order), as HTA sorts both by ts
        out[mine[np.argsort(start[ranges[mine]], kind="stable")]] = calls[
            np.argsort(start[calls], kind="stable")
        ]
    return out


def _op_stacks(profile: Profile, calls: np.ndarray) -> list[list[str]]:
    """The framework operators above each launch call row (outermost first; empty for -1 or none)."""
    events = profile.events
    parent = parent_rows(profile)
    operator = labels_mask(events["channel"], OPERATOR_CHANNELS)
    names = events["name"].array
    stacks = []
    for call in calls.tolist():
        stack = []
        up = parent[call] if call >= 0 else -1
        while up >= 0:
            if operator[up]:
                stack.append(str(names[up]))
            up = parent[up]
        stacks.append(stack[::-1])
    return stacks


def kernel_counters(profile: Profile) -> pd.DataFrame:
    """One row per range-profiler kernel, per rank in time order: :data:`KERNEL_COLUMNS` (``launch_row``: the
    events row of its launch call, -1 when not paired; the operators None then), then each counter of its args
    (NaN where a range lacks it), then ``flops`` and ``flops_<precision>`` from :data:`SASS_FLOP_COUNTERS` (NaN
    when the trace has none of them). Empty without ranges or when the trace was read without args."""
    ranges = range_rows(profile)
    events = profile.get("events")
    if len(ranges) == 0 or "args" not in events.columns:
        return pd.DataFrame(columns=KERNEL_COLUMNS)
    rank = masks.rank_array(profile)[ranges]
    start = events["start_us"].to_numpy(dtype=np.float64)[ranges]
    order = np.lexsort((start, rank))
    ranges, rank, start = ranges[order], rank[order], start[order]
    calls = _launch_pairs(profile, ranges)
    stacks = _op_stacks(profile, calls)
    frame = pd.DataFrame(
        {
            "rank": pd.array([None if r < 0 else int(r) for r in rank.tolist()], dtype="Int64"),
            "name": [str(n) for n in events["name"].array[ranges]],
            "start_us": start,
            "launch_row": calls,
            "op_stack": [s if c >= 0 else None for s, c in zip(stacks, calls.tolist(), strict=True)],
            "top_level_op": [s[0] if s else None for s in stacks],
            "bottom_level_op": [s[-1] if s else None for s in stacks],
        }
    )
    counters = _counters(events["args"].array[ranges].tolist())
    frame = pd.concat([frame, counters], axis=1)
    present = [c for c in SASS_FLOP_COUNTERS if c in counters.columns]
    for precision in PRECISIONS:
        mine = [c for c in present if SASS_FLOP_COUNTERS[c][1] == precision]
        frame[f"flops_{precision}"] = (
            sum(counters[c].fillna(0.0) * SASS_FLOP_COUNTERS[c][0] for c in mine) if mine else np.nan
        )
    frame["flops"] = frame[[f"flops_{p}" for p in PRECISIONS]].sum(axis=1, min_count=1) if present else np.nan
    return frame


def operator_counters(kernels: pd.DataFrame) -> pd.DataFrame:
    """:func:`kernel_counters` summed per top-level operator (a kernel not paired with its launch under
    None): ``top_level_op``, ``kernels``, each counter and the FLOPs columns, largest ``flops`` first (then the
    most kernels)."""
    if kernels.empty:
        return pd.DataFrame(columns=["top_level_op", "kernels"])
    values = [c for c in kernels.columns if c not in KERNEL_COLUMNS]
    keyed = kernels.assign(top_level_op=kernels["top_level_op"].fillna("")).groupby("top_level_op", sort=True)
    out = keyed[values].sum(min_count=1)
    out.insert(0, "kernels", keyed.size())
    out = out.reset_index()
    out["top_level_op"] = out["top_level_op"].replace("", None)
    by = ["flops", "kernels"] if "flops" in out.columns else ["kernels"]
    return out.sort_values(by, ascending=False, kind="stable", na_position="last").reset_index(drop=True)


def replay_section(profile: Profile) -> dict | None:
    """For "What limits this run": the trace's range-profiler kernels (``kernels``), their ranks and the
    ranges' median length (``median_range_us``), the sign that its times are the profiler's; None without."""
    ranges = range_rows(profile)
    if len(ranges) == 0:
        return None
    dur = profile.events["dur_us"].to_numpy(dtype=np.float64)[ranges]
    ranks = sorted({int(r) for r in masks.rank_array(profile)[ranges].tolist() if r >= 0})
    return {"kernels": int(len(ranges)), "ranks": ranks, "median_range_us": float(np.nanmedian(dur))}


def counters_section(profile: Profile, top: int = 10) -> dict | None:
    """The summary's ``counters``: kernels, how many were paired with their launch, the counters' names, the
    SASS FLOPs by precision over all kernels, and the ``top`` operators (:func:`operator_counters` rows);
    ``read`` False (the rest missing) when the trace has ranges but was read without args. None without."""
    if len(range_rows(profile)) == 0:
        return None
    kernels = _read_kernels(profile)
    if kernels.empty:
        return {"read": False, "kernels": int(len(range_rows(profile)))}
    counters = [c for c in kernels.columns if c not in KERNEL_COLUMNS and not c.startswith("flops")]
    flops = {p: _number(kernels[f"flops_{p}"].sum(min_count=1)) for p in PRECISIONS}
    operators = operator_counters(kernels).head(top)
    return {
        "read": True,
        "kernels": int(len(kernels)),
        "paired": int((kernels["launch_row"] >= 0).sum()),
        "counters": counters,
        "flops": flops,
        "operators": [
            {k: (_number(v) if not isinstance(v, str) and v is not None else v) for k, v in row.items()}
            for row in operators.to_dict("records")
        ],
    }


def _number(value: object) -> float | int | None:
    """A JSON number (None for NaN)."""
    if value is None or pd.isna(value):
        return None
    return int(value) if isinstance(value, (int, np.integer)) else float(value)


# The registered figures (``baseline``, ``diff``, the gate, ``trend``): the run's totals over its range-profiler
# kernels, each read from :func:`kernel_counters` (the summary's table), nothing recomputed.

#: The rollup suffix of a counter that adds up over kernels: a ``.sum`` of events, instructions or bytes
#: (Nsight Compute's metric names: ``dram__bytes_read.sum``). Any other rollup (``.avg``, ``.max``, ``.min``) or a
#: submetric after the rollup (``.sum.per_second``, ``.sum.pct_of_peak_sustained_elapsed``, ``.ratio``, ``.pct``)
#: is a rate, a share or an extreme, which a sum over kernels would not mean.
ADDITIVE_SUFFIX = ".sum"


def additive(name: str) -> bool:
    """Whether the counter ``name`` adds up over kernels (:data:`ADDITIVE_SUFFIX`), so that its run total is a
    figure; ``sm__throughput.avg.pct_of_peak_sustained_elapsed`` is not, ``dram__bytes_read.sum`` is."""
    return name.endswith(ADDITIVE_SUFFIX)


def _read_kernels(profile: Profile) -> pd.DataFrame:
    """:func:`kernel_counters`, once per :func:`popprof.metrics.compute` or :func:`popprof.metrics.shared` block."""
    return profile.cached("counters.kernel_counters", lambda: kernel_counters(profile))


def counter_totals(profile: Profile) -> dict[str, float]:
    """The run's total of each additive counter (:func:`additive`) over the kernels that recorded it, by the
    counter's name; empty without range-profiler kernels or when the trace was read without args."""
    kernels = _read_kernels(profile)
    names = [
        c for c in kernels.columns if c not in KERNEL_COLUMNS and not c.startswith("flops") and additive(c)
    ]
    if not names:
        return {}
    sums = kernels[names].sum(min_count=1)
    return {name: float(value) for name, value in sums.items() if not pd.isna(value)}


@metric(
    "counters.kernels",
    "kernels",
    "kernels with hardware counters in a CUPTI range-profiler trace (its cuda_profiler_range events, read "
    "with their args)",
    needs=("events",),
    better=None,
)
def counter_kernels(profile: Profile) -> float | None:
    kernels = _read_kernels(profile)
    return None if kernels.empty else float(len(kernels))


@metric(
    "counters.sass_flops",
    "flop",
    "floating-point operations from the SASS instruction counters of a range-profiler trace, all precisions, "
    "summed over kernels (HTA's weights: a fused multiply-add two; CUDA cores only, a tensor-core GEMM's floor)",
    needs=("events",),
    better=None,
)
def sass_flops(profile: Profile) -> float | None:
    kernels = _read_kernels(profile)
    return None if kernels.empty else _number(kernels["flops"].sum(min_count=1))


@metric_family(
    "counters.sass_flops.",
    "flop",
    "the SASS FLOPs of one precision (fp16, fp32, fp64), summed over kernels; a precision whose counters the "
    "trace does not record is left out",
    needs=("events",),
    better=None,
    absent_is_zero=False,  # a counter not recorded is not a count of zero
)
def sass_flops_by_precision(profile: Profile) -> dict[str, float]:
    kernels = _read_kernels(profile)
    if kernels.empty:
        return {}
    sums = kernels[[f"flops_{p}" for p in PRECISIONS]].sum(min_count=1)
    return {p: float(sums[f"flops_{p}"]) for p in PRECISIONS if not pd.isna(sums[f"flops_{p}"])}


@metric_family(
    "counters.total.",
    "count",
    "the run's total of each additive hardware counter of a range-profiler trace (a name ending in .sum: "
    "events, instructions or bytes; rates, shares, averages and extremes are left out), summed over kernels",
    needs=("events",),
    better=None,
    absent_is_zero=False,
)
def counter_totals_family(profile: Profile) -> dict[str, float]:
    return counter_totals(profile)
