"""Benchmarks are tools: every script takes --help, and what the scripts refer to exists."""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_script_takes_help(script, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [str(script), "--help"])
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # sys.path is restored afterwards, whatever the script adds
    before = set(sys.modules)
    try:
        with pytest.raises(SystemExit) as exit_info:
            runpy.run_path(str(script), run_name="__main__")
    finally:  # bench_pop.py imports the pva test double: later tests must not find it imported
        for name in set(sys.modules) - before:
            module_file = str(getattr(sys.modules[name], "__file__", "") or "")
            if (
                name == "pva"
                or name.startswith("pva.")
                or "pva_double" in module_file
                or module_file.startswith(str(BENCHMARKS))
            ):
                del sys.modules[name]
    assert exit_info.value.code in (0, None)
    out = capsys.readouterr().out
    assert out.startswith("usage:") and "--help" in out


def test_scripts_and_docs_name_only_benchmarks_that_exist():
    for path in [*BENCHMARKS.glob("*.sh"), *SCRIPTS, BENCHMARKS / "README.md"]:
        for name in re.findall(r"benchmarks/([\w.]+\.(?:py|sh))", path.read_text("utf-8")):
            assert (BENCHMARKS / name).exists(), (
                f"{path.name} refers to benchmarks/{name}, which does not exist"
            )


def test_the_table_helper_aligns_numbers_right(capsys):
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from _table import print_table
    finally:
        sys.path.remove(str(BENCHMARKS))
    print_table(["case", "wall s"], [["small", "0.25"], ["large input", "12.50"]])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines == [
        "| case        | wall s |",
        "|-------------|-------:|",
        "| small       |   0.25 |",
        "| large input |  12.50 |",
    ]
