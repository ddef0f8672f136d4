"""Multi-rank Kineto traces with a known late rank (the straggler rule's generated cases).

Each rank runs ``steps`` iterations (``ProfilerStep#1`` ...): a compute kernel, then an all-reduce. A late
rank's host reaches the all-reduce ``late_us`` later, so its kernel starts that much later; being a blocking
collective, every rank's all-reduce ends when the last rank's does (the others wait inside it). The layout is
the one HolisticTraceAnalysis reads (one ``rank-N.json`` per rank, ``distributedInfo``, ``ac2g`` flows), so
the same directory can be given to HTA's ``get_potential_stragglers``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

STEP_US = 10_000.0
COMPUTE_US = 4_000.0
ALLREDUCE_US = 2_000.0
KERNEL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"


def write_late_rank_run(
    directory: str | os.PathLike[str],
    ranks: int = 4,
    late: dict[int, float] | None = None,
    steps: int = 3,
) -> Path:
    """Write ``rank-0.json`` ... into ``directory``; ``late`` maps a rank to how many us late it starts the
    all-reduce of every iteration. Returns the directory."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    late = late or {}
    worst = max(late.values(), default=0.0)
    for rank in range(ranks):
        pid, gpu = 1000 + rank, rank
        events = [
            {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "python"}},
            {"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": "CPU"}},
            {"ph": "M", "name": "process_name", "pid": gpu, "tid": 0, "args": {"name": "python"}},
            {"ph": "M", "name": "process_labels", "pid": gpu, "tid": 0, "args": {"labels": f"GPU {gpu}"}},
            {"ph": "M", "name": "thread_name", "pid": gpu, "tid": 7, "args": {"name": "stream 7"}},
        ]
        correlation = 0
        for k in range(1, steps + 1):
            t0 = 1_000_000.0 + (k - 1) * STEP_US
            events.append(_x("user_annotation", f"ProfilerStep#{k}", pid, pid, t0, STEP_US - 10.0))
            for name, host_at, device_at, dur in (
                ("volta_sgemm_128x64_nn", t0 + 100.0, t0 + 200.0, COMPUTE_US),
                (KERNEL, t0 + 5_000.0 + late.get(rank, 0.0), t0 + 5_100.0 + late.get(rank, 0.0), None),
            ):
                correlation += 1
                if dur is None:  # the all-reduce ends when the last rank's does
                    dur = ALLREDUCE_US + worst - late.get(rank, 0.0)
                events.append(_x("cuda_runtime", "cudaLaunchKernel", pid, pid, host_at, 8.0, correlation))
                events.append(_x("kernel", name, gpu, 7, device_at, dur, correlation, stream=7))
                events.append(_flow("s", correlation, pid, pid, host_at))
                events.append(_flow("f", correlation, gpu, 7, device_at))
        doc = {
            "schemaVersion": 1,
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": ranks},
            "traceEvents": events,
        }
        (out / f"rank-{rank}.json").write_text(json.dumps(doc), encoding="utf-8")
    return out


def _x(
    cat: str, name: str, pid: int, tid: int, ts: float, dur: float, correlation: int = 0, stream=None
) -> dict:
    args = {"correlation": correlation} if correlation else {}
    if stream is not None:
        args.update({"device": pid, "stream": stream})
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _flow(ph: str, flow: int, pid: int, tid: int, ts: float) -> dict:
    event = {"ph": ph, "id": flow, "pid": pid, "tid": tid, "ts": ts, "cat": "ac2g", "name": "ac2g"}
    if ph == "f":
        event["bp"] = "e"
    return event
