"""``python -m popprof`` runs the CLI."""

from .cli import run

run()
