"""What the time account and "What limits this run" add to ``popprof summary`` (issue 41: at most 5 %).

One process reads the generated 600,000-event Kineto trace once, then times, alternating, each a fresh
scope (no intermediates kept between runs):

- ``summary``: the summary document without the account (``summarise`` with its ``time_account`` section
  left out): the figures as they were before the account;
- ``+ account``: ``summarise`` as it is (the ``time_account`` section);
- ``+ what limits``: ``explained_summary``, what ``popprof summary`` runs: the account, the rules (to price
  the opportunities) and the "What limits this run" document.

Prints the median and minimum of each and the medians' ratios. The whole command (read included) takes
about 1 s on this trace, so the added milliseconds over that are the end-to-end share.

Usage::

    python benchmarks/bench_account.py [--size 600k] [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import gen_traces  # noqa: E402

import popprof  # noqa: E402
from popprof.metrics import summary as summary_module  # noqa: E402
from popprof.report.explain import explained_summary  # noqa: E402


def _without_account(profile) -> dict:
    sections = summary_module.SECTIONS
    summary_module.SECTIONS = [s for s in sections if s[0] != "time_account"]
    try:
        return summary_module.summarise(profile)
    finally:
        summary_module.SECTIONS = sections


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="600k", choices=list(gen_traces.SIZES))
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    path = gen_traces.ensure(args.size)
    start = time.perf_counter()
    profile = popprof.open(path)
    print(f"read {path.name} in {time.perf_counter() - start:.2f} s ({len(profile.events):,} events)")
    cases = {
        "summary": _without_account,
        "+ account": summary_module.summarise,
        "+ what limits": explained_summary,
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeat):
        for name, func in cases.items():
            profile._cache.clear()
            start = time.perf_counter()
            func(profile)
            times[name].append(time.perf_counter() - start)
    base = statistics.median(times["summary"])
    print(f"{'case':<16}{'median ms':>12}{'min ms':>10}{'vs summary':>12}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:<16}{median * 1e3:>12.1f}{min(values) * 1e3:>10.1f}{median / base:>11.3f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
