"""Issue 25: shapes of real output that is public but not redistributable (or not found in public, licensed
repositories), written here from the documented format with the real runs' figures (facts, not copies).

- A sync-dominated run: thorbenlouw/lbm-graphcore, experiments/halo-exchange-approaches/results.txt
  (commit df670f6b, no licence): an SDK 2.x execution summary with 99.9 % sync and 0.0 % exchange.
"""

from __future__ import annotations

from pathlib import Path

import popprof
from popprof.rules import RULES

SYNC_BOUND = """Execution:

  Total cycles:                                         178,569,036 (approx 111,605.6 microseconds)
  Tile average compute cycles (including idle threads): 207,965.0 (0.1% of total)
  Tile average compute cycles (excluding idle threads): 98,504.3 (0.1% of total)
  Tile average IPU exchange cycles:                     19,309.1 (0.0% of total)
  Tile average global exchange cycles:                  0.0 (0.0% of total)
  Tile average host exchange cycles:                    0.0 (0.0% of total)
  Tile average sync cycles:                             178,341,761.9 (99.9% of total)
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_sync_bound_run_gets_sync_advice_not_exchange_advice(tmp_path):
    profile = popprof.open(_write(tmp_path, "sync.txt", SYNC_BOUND))
    (f,) = popprof.check(profile, rules=["exchange.share"]).items
    assert f.severity == "error" and f.title == "Sync-bound run"
    assert "limited by data movement" not in f.advice and f.advice != RULES["exchange.share"].advice_for(
        "ipu"
    )
    assert "imbalance" in f.advice and "host" in f.advice
    assert "sync is most of it" in f.message


def test_an_exchange_bound_run_keeps_exchange_advice(tmp_path):
    text = SYNC_BOUND.replace("19,309.1 (0.0% of total)", "150,000,000.0 (84.0% of total)").replace(
        "178,341,761.9 (99.9% of total)", "10,000,000.0 (5.6% of total)"
    )
    (f,) = popprof.check(popprof.open(_write(tmp_path, "x.txt", text)), rules=["exchange.share"]).items
    assert f.title == "Exchange-bound run" and f.advice == RULES["exchange.share"].advice_for("ipu")


# -- item 5: launches without device activity ---------------------------------------------------------
# The real 8-GPU trace of the issue (236 cudaLaunchKernel calls, 268 flow starts, 2 ends, no kernel) was not
# found in a public, licensed repository; this is its shape: Kineto's host side, no GPU event.


def _launches_only(tmp_path: Path, launches: int = 236) -> Path:
    import json

    events = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}}]
    for i in range(1, launches + 1):
        t = 1_000.0 + 100.0 * i
        events.append(
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t, "dur": 50}
        )
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": t + 10,
                "dur": 8,
                "args": {"correlation": i},
            }
        )
        events.append({"ph": "s", "id": i, "pid": 1, "tid": 1, "ts": t + 10, "cat": "ac2g", "name": "ac2g"})
    path = tmp_path / "host_only.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}), encoding="utf-8")
    return path


def test_launches_without_device_activity_are_a_finding_and_a_summary_line(tmp_path):
    from popprof.metrics.summary import summarise
    from popprof.report.summary import render_text

    profile = popprof.open(_launches_only(tmp_path))
    (f,) = popprof.check(profile, rules=["host.launches-without-device"]).items
    assert f.severity == "warning" and f.value == 236
    assert "236 kernel launch(es) on the host (cudaLaunchKernel 236 x)" in f.message
    assert "ProfilerActivity.CUDA" in f.advice and "CUPTI" in f.advice
    text = render_text(summarise(profile))
    assert "Device side missing: 236 kernel launches (cudaLaunchKernel 236 x)" in text


def test_a_trace_with_kernels_has_no_such_finding():
    real = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces" / "nccl_data.json.gz"
    assert popprof.check(popprof.open(real), rules=["host.launches-without-device"]).items == []


# -- item 7: profiler bookkeeping is no work --------------------------------------------------------
# Kineto writes CUPTI's overhead as X events of category "overhead" on pid -1 ("Activity Buffer Request"),
# and each step as a ProfilerStep#N annotation; no public, licensed trace with the overhead events was found.


def _with_bookkeeping(tmp_path: Path) -> Path:
    import json

    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "process_name", "pid": -1, "tid": 0, "args": {"name": "CUPTI Overhead"}},
        {
            "ph": "X",
            "cat": "overhead",
            "name": "Activity Buffer Request",
            "pid": -1,
            "tid": 0,
            "ts": 900,
            "dur": 9e4,
        },
    ]
    for k in range(1, 4):
        t0 = 100_000.0 * k
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{k}",
                "pid": 1,
                "tid": 1,
                "ts": t0,
                "dur": 99_000.0,
            }
        )
        events.append(
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t0 + 10, "dur": 500}
        )
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": t0 + 20,
                "dur": 5,
                "args": {"correlation": k},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": "gemm",
                "pid": 0,
                "tid": 7,
                "ts": t0 + 30,
                "dur": 1_000,
                "args": {"correlation": k, "stream": 7, "device": 0},
            }
        )
    path = tmp_path / "bookkeeping.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}), encoding="utf-8")
    return path


def test_profiler_bookkeeping_is_left_out_of_work_figures(tmp_path):
    from popprof.metrics.summary import summarise

    profile = popprof.open(_with_bookkeeping(tmp_path))
    trace = summarise(profile)["trace"]
    names = {op["name"] for op in trace["top_cpu_ops_by_self"]}
    assert "Activity Buffer Request" not in names and "aten::mm" in names
    assert all(t["pid"] != -1 for t in trace["busiest_threads"])
    for f in popprof.check(profile, rules=["host.*"]):
        assert "ProfilerStep" not in f.message and "Activity Buffer Request" not in f.message, f.rule_id
