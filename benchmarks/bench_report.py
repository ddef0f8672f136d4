"""Benchmark: where `popprof report` spends its time on the samples (issue 46 item 7: 2.3-4.0 s each).

Usage: python benchmarks/bench_report.py [--repeat 3] [SAMPLE ...]

Each run is a fresh interpreter that does what `popprof report SAMPLE -o FILE` does, timing each
phase (wall and CPU seconds of the process): importing the CLI; importing matplotlib and choosing
Agg (`popprof.cli.plot._use_agg`); reading the sample (with the reader options `report` uses);
importing the report and the rules; the rule checks; building the figures (`popprof.plots.plot`);
turning them into PNG (`figure.savefig`: layout, drawing, PNG encoding); the rest of the HTML
(summary, findings, templates) and writing it. The same run without plots (`--no-plots`) and the
whole `popprof report` command (a plain subprocess: interpreter start-up and the launcher included)
are timed too. Prints medians per sample.
Default samples: the generated Mk2 bundle, the Chrome trace and the text summary in fixtures/.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _table import doc_parser, load_line, print_table

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = [
    ROOT / "fixtures" / "mk2_training.popprof",
    ROOT / "fixtures" / "traces" / "training_loop.json.gz",
    ROOT / "fixtures" / "text_summary" / "mk2_training.txt",
]
PHASES = [
    "import CLI",
    "import matplotlib (Agg)",
    "read",
    "import report + rules",
    "checks",
    "figures built",
    "figures to PNG",
    "rest of HTML + write",
]

#: Runs in the child: prints one JSON object {phase: [wall s, cpu s]}.
CHILD = r"""
import json, sys, time
marks = {}
last = [time.perf_counter(), time.process_time()]

def mark(name):
    now = [time.perf_counter(), time.process_time()]
    old = marks.get(name, [0.0, 0.0])
    marks[name] = [old[0] + now[0] - last[0], old[1] + now[1] - last[1]]
    last[:] = now

sample, out, plots = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
from popprof.cli import plot as cli_plot
from popprof.cli.common import load_profiles, reader_options
mark("import CLI")
if plots:
    cli_plot._use_agg()
mark("import matplotlib (Agg)")
config = cli_plot._config(None)
profiles = load_profiles(sample, None, **reader_options(None, config, **cli_plot.FIGURES_ONLY))
mark("read")
from popprof import plots as plots_module
from popprof.report import html
import popprof.rules
mark("import report + rules")
original_checks, original_plot, original_figure = html.run_checks, plots_module.plot, html.figure_html

def run_checks(*args, **kwargs):
    mark("rest of HTML + write")
    try:
        return original_checks(*args, **kwargs)
    finally:
        mark("checks")

def plot(*args, **kwargs):
    mark("rest of HTML + write")
    try:
        return original_plot(*args, **kwargs)
    finally:
        mark("figures built")

def figure_html(*args, **kwargs):
    mark("rest of HTML + write")
    try:
        return original_figure(*args, **kwargs)
    finally:
        mark("figures to PNG")

html.run_checks, plots_module.plot, html.figure_html = run_checks, plot, figure_html
html.write(list(profiles.values()), out, plots=plots, config=config)
mark("rest of HTML + write")
print(json.dumps(marks))
"""


def _phases(sample: Path, plots: bool) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(sample), str(Path(tmp) / "r.html"), "1" if plots else "0"],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _command(sample: Path) -> tuple[float, float]:
    """(wall s, CPU s) of the whole ``popprof report`` command in a fresh interpreter."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "popprof", "report", str(sample), "-o", str(Path(tmp) / "r.html")],
            capture_output=True,
            env=env,
            check=True,
        )
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    parser = doc_parser(__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("samples", nargs="*", type=Path, default=SAMPLES)
    args = parser.parse_args()
    print(load_line())
    for sample in args.samples:
        runs = [_phases(sample, True) for _ in range(args.repeat)]
        bare = [_phases(sample, False) for _ in range(args.repeat)]
        whole = [_command(sample) for _ in range(args.repeat)]
        rows = []
        for phase in PHASES:
            wall = statistics.median(r.get(phase, [0.0, 0.0])[0] for r in runs)
            cpu = statistics.median(r.get(phase, [0.0, 0.0])[1] for r in runs)
            rows.append([phase, f"{wall:.2f}", f"{cpu:.2f}"])
        total = [statistics.median(sum(v[i] for v in r.values()) for r in runs) for i in (0, 1)]
        no_plots = [statistics.median(sum(v[i] for v in r.values()) for r in bare) for i in (0, 1)]
        rows.append(["total in process", f"{total[0]:.2f}", f"{total[1]:.2f}"])
        rows.append(["total without plots", f"{no_plots[0]:.2f}", f"{no_plots[1]:.2f}"])
        rows.append(
            [
                "`popprof report` command",
                f"{statistics.median(w for w, _ in whole):.2f}",
                f"{statistics.median(c for _, c in whole):.2f}",
            ]
        )
        print_table(["phase", "wall s", "CPU s"], rows, title=f"{sample.name} (median of {args.repeat})")


if __name__ == "__main__":
    main()
