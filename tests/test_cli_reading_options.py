"""One decorator for the option stack of every command that reads profiles (issue 43, item 7)."""

from __future__ import annotations

import click
import pytest

from popprof.cli import LazyGroup
from popprof.cli.common import reading_options

READERS = (
    "summary",
    "tables",
    "export",
    "check",
    "diff",
    "baseline",
    "plot",
    "report",
    "pilot",
    "record",
    "query",
    "timeline",
)


def _names(command: click.Command) -> list[str]:
    return [opt for param in command.params for opt in param.opts if opt.startswith("--")]


def test_the_stack_comes_in_one_order():
    @click.command()
    @reading_options(engine=True, config=True)
    def both() -> None:
        """A command with the whole stack."""

    @click.command()
    @reading_options()
    def least() -> None:
        """A command with the device map and the global options only."""

    assert _names(both) == ["--engine", "--config", "--device-map", "--quiet", "--limit"]
    assert _names(least) == ["--device-map", "--quiet", "--limit"]


@pytest.mark.parametrize("name", READERS)
def test_every_reading_command_ends_with_the_stack(name):
    names = _names(LazyGroup._load(name))
    assert names[-3:] == ["--device-map", "--quiet", "--limit"], names
