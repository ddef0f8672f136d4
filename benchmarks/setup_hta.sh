#!/usr/bin/env bash
# Create the benchmark-only virtual environment holding HolisticTraceAnalysis (HTA),
# the reference trace parser that benchmarks/bench_trace.py compares popprof against.
# HTA is never a popprof dependency: it lives only in benchmarks/.venv-hta (git-ignored).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv-hta"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
# ijson lets HTA use its streaming (IJSON_BATCH_AND_COMPRESS) backend too
"$venv/bin/python" -m pip install --quiet "HolisticTraceAnalysis==0.5.0" ijson
"$venv/bin/python" -c "import hta, importlib.metadata as m; print('HTA', m.version('HolisticTraceAnalysis'))"
