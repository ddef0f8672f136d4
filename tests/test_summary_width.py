"""``popprof summary`` text fits an 80-column terminal and a CI log, keeping every figure (issue: the
trace part of the summary was up to 170 columns wide).

Inputs: every real trace and Poplar text in ``fixtures/real/`` (provenance in their READMEs) and the
bundled ``fixtures/*.popprof``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import popprof
from popprof.cli import cli
from popprof.cli.common import clean_for_json
from popprof.io import units
from popprof.report.explain import explained_summary
from popprof.report.summary import render_text

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
REAL = FIXTURES / "real"
INPUTS = sorted(
    [
        *(REAL / "traces").glob("*.json.gz"),
        *(p for p in (REAL / "traces").iterdir() if p.is_dir()),
        *(p for p in (REAL / "poplar").glob("*.txt") if not p.name.startswith("LICENSE")),
        *FIXTURES.glob("*.popprof"),
    ]
)


def _summary(path: Path, *options: str, columns: str | None = None) -> str:
    """``popprof summary PATH`` as a pipe gets it (``COLUMNS`` unset unless given)."""
    result = CliRunner().invoke(cli, ["summary", str(path), *options], env={"COLUMNS": columns})
    assert result.exit_code == 0, result.output
    return result.stdout  # a reader's warning on stderr is one line per source (docs/figures.md)


def _devices(doc: dict) -> list[dict]:
    return (doc.get("trace") or {}).get("devices") or doc.get("devices") or []


def test_inputs_cover_traces_poplar_and_bundles():
    names = {p.name for p in INPUTS}
    assert {"dlrm_8ranks", "nccl_data.json.gz", "mk2_training.popprof"} <= names
    assert len(INPUTS) >= 20


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.name)
def test_every_line_fits_80_columns_and_keeps_the_figures(path: Path):
    text = _summary(path)
    wide = [line for line in text.splitlines() if len(line) > 80]
    assert not wide, "\n".join(wide)
    doc = json.loads(_summary(path, "--format", "json"))
    for d in _devices(doc):  # every device's window, busy share and host blocked share
        assert units.duration(d.get("span_us")) in text
        if d.get("idle_pct") is not None:
            assert units.value(100.0 - d["idle_pct"], "%") in text
        if d.get("host_wait_pct") is not None:
            assert units.value(d["host_wait_pct"], "%") in text
    trace = doc.get("trace") or {}
    for k in trace.get("top_kernels") or []:
        for key in ("total_us", "mean_us", "min_us", "max_us", "std_us"):
            assert units.duration(k.get(key)) in text
    for t in trace.get("busiest_threads") or []:
        assert units.duration(t["busy_us"]) in text
    for c, v in ((trace.get("device_activity") or {}).get("by_category") or {}).items():
        assert units.duration(v["total_us"]) in text, c
    lines = text.splitlines()
    assert not [line for line in lines if line != line.rstrip()]  # no trailing blanks in a CI log
    for o in (doc.get("what_limits") or {}).get("opportunities") or []:
        item = f"{o['rule_id']}: {o['title']}"  # a rule and its title are never split across lines
        assert len(item) + 7 > 80 or any(item in line for line in lines), item
    wait = trace.get("host_wait") or {}
    if wait.get("events"):
        assert f"Host blocked on device: {units.duration(wait['total_us'])}" in text
        for w in wait["top"]:  # a count stays beside its "x" when the line wraps
            assert f"{w['count']:,} x {units.duration(w['total_us'])}" in " ".join(text.split())


def test_top_kernels_keep_every_kernel_apart_in_80_columns():
    text = _summary(REAL / "traces" / "nccl_data.json.gz")
    block = text[text.index("  Top kernels") :].split("\n\n")[0].splitlines()
    doc = json.loads(_summary(REAL / "traces" / "nccl_data.json.gz", "--format", "json"))
    kernels = doc["trace"]["top_kernels"]
    # the title, two header lines, a figures line and a name line per kernel, then the type codes
    names = block[4 : 3 + 2 * len(kernels) : 2]
    assert len(names) == len(kernels) and len(set(names)) == len(names)
    assert all(name.startswith("      ") and not name.startswith("       ") for name in names)
    assert block[-1].startswith("    type: ") and "COMM = COMMUNICATION" in block[-1]


def test_device_table_splits_in_80_columns_and_is_one_table_when_wider():
    path = REAL / "traces" / "dlrm_8ranks"
    narrow = _summary(path).splitlines()
    heads = [line for line in narrow if line.strip().startswith("rank  device")]
    assert len(heads) == 2 and "busy" in heads[0] and "host blocked" in heads[1]
    wide = _summary(path, columns="120").splitlines()
    assert max(len(line) for line in wide) <= 120
    heads = [line for line in wide if line.strip().startswith("rank  device")]
    assert len(heads) == 1 and "busy" in heads[0] and "host blocked" in heads[0]


@pytest.mark.parametrize(
    "name", ["traces/dlrm_8ranks", "traces/nccl_data.json.gz", "../mk2_training.popprof"]
)
def test_the_text_leaves_the_json_document_unchanged(name: str):
    """JSON and text off the same profile: laying the text out changes no key or value of the document."""
    doc = explained_summary(popprof.open(REAL / name))
    before = copy.deepcopy(clean_for_json(doc))
    render_text(doc)
    render_text(doc, width=40)
    assert clean_for_json(doc) == before
