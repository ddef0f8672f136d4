"""``python -m popprof`` runs the CLI (through :mod:`popprof.launch`, as the console script does)."""

from .launch import run

run()
