"""Where the summary's CPU goes after the read: ``explained_summary`` and its parts, per checkout, A/B.

``popprof summary`` reads the trace, then runs ``popprof.report.explain.explained_summary`` (the
summary's sections and the rules behind "What limits this run") on one core while the other is idle:
that tail is what separates the command from its parse. This script times it apart from the read.
Each run is a fresh process per checkout (``PYTHONPATH`` set to it), alternating A and B: it reads
the trace as the command does (``flows_on_use``), then measures the CPU time (``time.process_time``)
of ``explained_summary`` on its first call (*cold*: as the command runs it, first-use costs
included) and on a second call with nothing cached (*warm*). A second process per run times the
parts in the command's order, sharing one scope (``metrics.shared``) as the command does: the
registry's figures first, then each section, then the rules, so a part that fills the cache for the
next one carries that cost. CPU, not wall: it moves less with the machine's other work. Medians.

Usage::

    python benchmarks/bench_summary_parts.py                       # this checkout, 5 runs
    python benchmarks/bench_summary_parts.py --a /path/to/other --b . --runs 7
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _table import doc_parser, load_line, print_table  # noqa: E402
from gen_traces import ensure  # noqa: E402

#: the whole tail, cold then warm (a second call on an empty cache)
WHOLE = r"""
import json, sys, time
import popprof
from popprof.metrics import shared
from popprof.report.explain import explained_summary

profile = popprof.open(sys.argv[1], flows_on_use=True)
profile.events
out = {}
for label in ("cold", "warm"):
    start = time.process_time()
    explained_summary(profile)
    out[label] = time.process_time() - start
print(json.dumps(out))
"""

#: the parts in the command's order, one shared scope
PARTS = r"""
import json, sys, time
import popprof
from popprof.metrics import compute, shared
from popprof.metrics import summary as sections
from popprof.report.explain import what_limits
from popprof.rules import check

profile = popprof.open(sys.argv[1], flows_on_use=True)
profile.events
out = {}
with shared(profile):
    start = time.process_time()
    figures = compute(profile)
    out["registry figures (metrics.compute)"] = time.process_time() - start
    for key, func in sections.SECTIONS:
        start = time.process_time()
        if func is sections.memory_section:
            func(profile, figures)
        elif func is sections.execution_section:
            func(profile, figures, 10)
        elif func in (sections.trace_section, sections.operations_section):
            func(profile, 10)
        else:
            func(profile)
        out["section " + key] = time.process_time() - start
    start = time.process_time()
    what_limits(profile, check(profile))
    out["rules + what limits"] = time.process_time() - start
print(json.dumps(out))
"""


def _run(checkout: Path, script: str, trace: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", script, str(trace)],
        env={**os.environ, "PYTHONPATH": str(checkout)},
        cwd=checkout,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = doc_parser(__doc__)
    parser.add_argument("--a", type=Path, default=HERE.parent, help="Checkout A (default: this one).")
    parser.add_argument("--b", type=Path, help="Checkout B, to compare with A.")
    parser.add_argument("--trace", type=Path, help="A trace file (default: the generated 600k trace).")
    parser.add_argument("--runs", type=int, default=5, help="Runs per checkout (default 5).")
    args = parser.parse_args(argv)
    trace = (args.trace or ensure("600k")).resolve()
    sides = {"A": args.a.resolve()} | ({"B": args.b.resolve()} if args.b else {})
    whole: dict[str, list[dict]] = {side: [] for side in sides}
    parts: dict[str, list[dict]] = {side: [] for side in sides}
    for i in range(args.runs):
        for side in sides if i % 2 == 0 else reversed(list(sides)):
            whole[side].append(_run(sides[side], WHOLE, trace))
            parts[side].append(_run(sides[side], PARTS, trace))
    print(f"{trace.name}, {args.runs} runs per checkout; {load_line()}")
    for side, checkout in sides.items():
        print(f"{side}: {checkout}")

    def median(rows: list[dict], key: str) -> float:
        return statistics.median(row[key] for row in rows)

    header = ["CPU s (median)", *sides]
    rows = [
        [f"explained_summary, {label}", *(f"{median(whole[s], label):.3f}" for s in sides)]
        for label in ("cold", "warm")
    ]
    shown = [k for k in parts["A"][0] if any(median(parts[s], k) >= 0.0005 for s in sides)]
    rows += [[k, *(f"{median(parts[s], k):.3f}" for s in sides)] for k in shown]
    if "B" in sides:
        header.append("B against A")
        for row, key in zip(rows, ["cold", "warm", *shown], strict=True):
            source = whole if key in ("cold", "warm") else parts
            a, b = median(source["A"], key), median(source["B"], key)
            row.append(f"{b / a - 1:+.0%}" if a else "")
    print_table(header, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
