"""What the host-device copies add to ``explained_summary``: their parts timed apart, in the summary's scope.

An A/B run of ``bench_summary_parts.py`` moves by 10-20 % between sets on a shared 2-core machine, far more
than the copies' few milliseconds. This script times them directly instead: each run is a fresh process that
reads the trace as ``popprof summary`` does (``flows_on_use``), runs ``explained_summary`` once inside
``metrics.shared`` (cold, the whole tail), then drops the copies' cached values and times, CPU
(``time.process_time``), what the copies add to that tail: the copies by kind (``copy_records``: the copy
events, their arrays, the account's copies split by kind, the records; what the summary's trace part reads),
``check`` of ``host.pageable-copies`` alone (its records cached, as in the summary; ``check``'s own set-up
for one rule counted too, so an upper bound) and the text block (``render_copies``). Medians over the runs.

Usage::

    python benchmarks/bench_copies.py                 # the 600k-event trace, 5 runs
    python benchmarks/bench_copies.py --runs 7 TRACE
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from gen_traces import ensure  # noqa: E402

RUN = r"""
import json, sys, time
import popprof
from popprof.metrics import copies, shared
from popprof.report.explain import explained_summary
from popprof.report.summary import render_copies
from popprof.rules import check

profile = popprof.open(sys.argv[1], flows_on_use=True)
profile.events
out = {}
with shared(profile):
    start = time.process_time()
    explained_summary(profile)
    out["explained_summary_cold"] = time.process_time() - start
    for key in [k for k in list(profile._cache) if k.startswith("copies.")]:
        profile._cache.pop(key)
    start = time.process_time()
    kinds = copies.copy_records(profile)
    out["copy_records"] = time.process_time() - start
    start = time.process_time()
    check(profile, rules=["host.pageable-copies"])
    out["rule"] = time.process_time() - start
    start = time.process_time()
    render_copies(kinds)
    out["text"] = time.process_time() - start
    out["copies"] = sum(k["count"] for k in kinds)
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?", help="a trace (default: benchmarks/data/kineto_600k.json)")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    trace = Path(args.trace) if args.trace else ensure("600k")
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    runs = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", RUN, str(trace)], env=env, check=True, capture_output=True, text=True
            ).stdout
        )
        for _ in range(args.runs)
    ]
    median = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    added = median["copy_records"] + median["rule"] + median["text"]
    print(f"{trace.name}, {args.runs} runs, {int(median['copies']):,} copies; CPU s (median)")
    for key in ("explained_summary_cold", "copy_records", "rule", "text"):
        print(f"  {key:<24} {median[key]:.4f}")
    print(
        f"  added                    {added:.4f} ({100 * added / median['explained_summary_cold']:.1f} % of cold)"
    )


if __name__ == "__main__":
    main()
