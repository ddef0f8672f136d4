"""Issue 25: shapes of real output that is public but not redistributable (or not found in public, licensed
repositories), written here from the documented format with the real runs' figures (facts, not copies).

- A sync-dominated run: thorbenlouw/lbm-graphcore, experiments/halo-exchange-approaches/results.txt
  (commit df670f6b, no licence): an SDK 2.x execution summary with 99.9 % sync and 0.0 % exchange.
- Headerless execution summaries: the same repository, experiments/gaussian-blur-scaling/exchange-vs-compute.txt
  (commit 97cd841a, no licence): three SDK 2.x execution sections without their "Execution:" heading, the
  first labelled "float" at column 0, the second " float2" indented by one space with its figures by three,
  the third unlabelled after a blank line. The layout is that file's; the numbers below are made up.
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


def test_device_rules_say_the_device_side_is_missing_not_to_map_devices(tmp_path):
    """With launches and no device event, the rules that need device activity are not evaluated because the
    device side is missing: a device map cannot help, so none of them suggests one."""
    result = popprof.check(popprof.open(_launches_only(tmp_path)))
    reasons = dict(result.not_evaluated)
    for rule_id in ("host.device-gaps", "host.long-events", "exchange.share", "exchange.phases"):
        assert "device side is missing (236 kernel launch(es)" in reasons[rule_id], rule_id
        assert "--device-map cannot bring it back" in reasons[rule_id]
        assert "map device events with" not in reasons[rule_id]


def test_a_host_only_trace_without_launches_still_suggests_a_device_map(tmp_path):
    import json

    path = tmp_path / "host.json"
    events = [{"ph": "X", "name": "step", "pid": 1, "tid": 1, "ts": 0, "dur": 10}]
    path.write_text(json.dumps({"traceEvents": events}))
    reasons = dict(popprof.check(popprof.open(path), rules=["host.device-gaps"]).not_evaluated)
    assert "--device-map" in reasons["host.device-gaps"] and "missing" not in reasons["host.device-gaps"]


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
    assert not [n for n in names if n.startswith("ProfilerStep")]  # a step's marker is no CPU op
    assert all(t["pid"] != -1 for t in trace["busiest_threads"])
    for f in popprof.check(profile, rules=["host.*"]):
        assert "ProfilerStep" not in f.message and "Activity Buffer Request" not in f.message, f.rule_id


# -- item 3: execution summaries whose "Execution:" heading was cut -------------------------------------

HEADERLESS = """float
  Total cycles:                                         120,000,000 (approx 75,000.0 microseconds)
  Tile average compute cycles (including idle threads): 30,000,000.0 (25.0% of total)
  Tile average IPU exchange cycles:                     180,000.0 (0.2% of total)
  Tile average global exchange cycles:                  0.0 (0.0% of total)
  Tile average host exchange cycles:                    6,000,000.0 (5.0% of total)
  Tile average sync cycles:                             83,820,000.0 (69.8% of total)

 float2
   Total cycles:                                         100,000,000 (approx 62,500.0 microseconds)
   Tile average compute cycles (including idle threads): 15,000,000.0 (15.0% of total)
   Tile average IPU exchange cycles:                     180,000.0 (0.2% of total)
   Tile average global exchange cycles:                  0.0 (0.0% of total)
   Tile average host exchange cycles:                    6,000,000.0 (6.0% of total)
   Tile average sync cycles:                             78,820,000.0 (78.8% of total)

  Total cycles:                                         40,000,000 (approx 25,000.0 microseconds)
  Tile average compute cycles (including idle threads): 8,000,000.0 (20.0% of total)
  Tile average IPU exchange cycles:                     100,000.0 (0.3% of total)
  Tile average global exchange cycles:                  0.0 (0.0% of total)
  Tile average host exchange cycles:                    3,000,000.0 (7.5% of total)
  Tile average sync cycles:                             28,900,000.0 (72.3% of total)
"""


def _sections(text: str) -> list[str]:
    """The three execution sections of HEADERLESS, figure lines only, without indent."""
    out: list[list[str]] = []
    for line in text.splitlines():
        body = line.strip()
        if body.startswith("Total cycles"):
            out.append([])
        if body.startswith(("Total", "Tile average")):
            out[-1].append(body)
    return ["\n".join(lines) + "\n" for lines in out]


def _totals(profile) -> list[tuple]:
    frame = profile.execution_totals[["category", "basis", "cycles", "share", "time_us"]]
    return [tuple(row) for row in frame.astype(object).where(frame.notna(), None).itertuples(index=False)]


def test_headerless_execution_summaries_are_read_with_their_labels(tmp_path):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # complete sections: no truncation warning
        profiles = popprof.open_all(_write(tmp_path, "exchange-vs-compute.txt", HEADERLESS))
    assert list(profiles) == ["float", "float2", "run_3"]
    for profile, section in zip(profiles.values(), _sections(HEADERLESS), strict=True):
        full = popprof.open(_write(tmp_path, "full.txt", "Execution:\n\n" + section))
        assert _totals(profile) == _totals(full)  # the same figures as the same lines under a heading
        assert int(profile.meta["text_summary.unrecognised_count"]) == 0
    assert profiles["float2"].meta["text_summary.label"] == "float2"
    assert _totals(profiles["float"])[0] == ("total", "total", 120_000_000.0, None, 75_000.0)
    assert _totals(profiles["run_3"])[-1][:2] == ("sync", "tile_average")


def test_a_second_total_in_an_execution_section_starts_the_next_summary(tmp_path):
    """A full summary followed by a labelled headerless one: two profiles, not one with the second's figures
    dropped as repeats."""
    first, second, _ = _sections(HEADERLESS)
    text = "Execution:\n\n" + first + "\nfloat2\n" + second
    profiles = popprof.open_all(_write(tmp_path, "two.txt", text))
    assert list(profiles) == ["run_1", "float2"]
    assert _totals(profiles["float2"])[0][2] == 100_000_000.0


def test_a_lone_total_cycles_line_in_a_log_is_no_summary(tmp_path):
    from popprof.readers import text_summary

    path = _write(tmp_path, "train.log", "epoch 1\nTotal cycles: 5 (approx 1 microseconds)\nloss 0.3\n")
    assert not text_summary.sniff(path, path.read_bytes())


# -- item 9: an out-of-memory log of many compilations ----------------------------------------------------
# The real log (16 failed compilations) was not found in a public, licensed repository; this is its
# shape: one Poplar message per failed compilation among a program's output, Mk2 tiles.


def _many_compilations(tmp_path: Path, n: int) -> Path:
    lines = []
    for k in range(n):
        used = 640_000 + 1_000 * k
        lines += [
            f"Compiling model variant {k} (batch {2 ** (k % 5)})",
            f"Exception: Out of memory on tile {k * 7}: {used:,} bytes used but tiles only have 638,976 bytes of"
            " memory",
            "",
        ]
    return _write(tmp_path, "sweep.log", "\n".join(lines) + "\n")


def test_an_out_of_memory_log_of_16_compilations_is_figures_per_compilation(tmp_path):
    from popprof.metrics.summary import summarise
    from popprof.report.summary import render_text

    profile = popprof.open(_many_compilations(tmp_path, 16))
    assert profile.out_of_memory["compilation"].tolist() == list(range(16))
    doc = summarise(profile)
    memory = doc["memory"]
    assert memory["failed_compilations"] == 16
    assert memory["tiles_out_of_memory"] is None and memory["max_tile_incl_gaps_bytes"] is None
    text = render_text(doc)
    assert "failed compilations    16" in text and "tiles out of memory" not in text
    assert "compilation 15: tile 105 needs 655,000 B" in text and "n/a" not in text
    (f,) = popprof.check(profile, rules=["memory.tile-oom"]).items
    assert f.severity == "error" and f.message.startswith("16 compilations failed: out of memory")


def test_more_compilations_than_the_summary_lists_say_how_many_more(tmp_path):
    from popprof.metrics.summary import summarise
    from popprof.report.summary import render_text

    text = render_text(summarise(popprof.open(_many_compilations(tmp_path, 23))))
    assert "compilation 19:" in text and "compilation 20:" not in text
    assert "(3 more in --format json)" in text
