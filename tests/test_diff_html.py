"""``popprof.explain(diff)`` (the diff's "What changed" blocks as an object) and ``popprof diff --format html``.

The object's text is compared with the blocks ``popprof diff`` prints, its documents with the JSON's; the page's
figures are read back from its cells with :mod:`html.parser` and compared with the JSON of the same diff. Inputs:
the IPU pair ``fixtures/mk2_training.popprof`` / ``mk2_training_v2.popprof`` and HTA's GPU pair
``fixtures/real/traces/hta_trace_compare_{base,test}.json.gz``; the hostile variant is written to ``tmp_path``.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from engine_helpers import two_engines

import popprof
from popprof.cli import main
from popprof.io import jsonout, units
from popprof.readers import bundle
from popprof.report.diff_explain import WhatChanged

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
MK2 = (FIXTURES / "mk2_training.popprof", FIXTURES / "mk2_training_v2.popprof")
HTA = (
    FIXTURES / "real" / "traces" / "hta_trace_compare_base.json.gz",
    FIXTURES / "real" / "traces" / "hta_trace_compare_test.json.gz",
)
EVIL = "<script>alert('x')</script>"


def run(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


class Cells(HTMLParser):
    """Every table row of a page: (the row's class, [(cell text, cell attributes)]), and the text of every tag."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[str | None, list[tuple[str, dict]]]] = []
        self.tags: list[str] = []
        self._cell: tuple[list[str], dict] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)
        if tag == "tr":
            self.rows.append((dict(attrs).get("class"), []))
        elif tag in ("td", "th"):
            self._cell = ([], dict(attrs))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1][1].append(("".join(self._cell[0]), self._cell[1]))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell[0].append(data)


def parse(page: str) -> Cells:
    cells = Cells()
    cells.feed(page)
    cells.close()
    return cells


@pytest.fixture(scope="module", params=["mk2", "hta"])
def pair(request) -> tuple[Path, Path]:
    return MK2 if request.param == "mk2" else HTA


@pytest.fixture(scope="module")
def change(pair):
    return popprof.diff(popprof.open(pair[0]), popprof.open(pair[1]))


def test_explain_text_is_the_cli_text_blocks(capsys, tmp_path, pair, change):
    out = tmp_path / "diff.txt"
    code, _, _ = run(capsys, "diff", *pair, "--no-gate", "-o", out)
    assert code == 0
    printed = out.read_text().splitlines()
    explained = popprof.explain(change)
    assert isinstance(explained, WhatChanged)
    block = repr(explained).splitlines()
    start = printed.index(block[0])
    assert printed[start : start + len(block)] == block
    assert printed[start + len(block)] == ""  # the whole block: the metrics follow after a blank line
    assert block[0].startswith("What changed")
    memory = [line for line in block if line.startswith("What changed in memory")]
    assert len(memory) == (pair == MK2)  # the GPU pair has no per-tile memory: no memory block
    assert max(len(line) for line in block) <= 80


def test_explain_documents_are_the_json(capsys, pair, change):
    code, out, _ = run(capsys, "diff", *pair, "--no-gate", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    explained = popprof.explain(change)
    assert json.loads(jsonout.dumps(explained.what_changed)) == doc["what_changed"]
    assert json.loads(jsonout.dumps(explained.doc)) == {
        k: doc[k] for k in ("what_changed", "memory_changed") if k in doc
    }
    assert (explained.memory_changed is None) == ("memory_changed" not in doc)


def test_explain_html_holds_both_blocks_with_the_json_figures(change):
    explained = popprof.explain(change)
    page = explained._repr_html_()
    doc = explained.what_changed
    assert "What changed" in page and "<script" not in page
    assert ("What changed in memory" in page) == (explained.memory_changed is not None)
    cells = parse(page)
    texts = {tuple(t for t, _ in cells_) for _, cells_ in cells.rows}
    for part in doc["parts"][:3]:
        assert any(row[:2] == (part["words"], units.change(part["change_us"], "us")) for row in texts)
    for r in (doc["contributors"] or {}).get("rows", []):
        unit = "" if doc["contributors"]["unit"] == "cycles" else "us"
        assert any(row[:2] == (units.change(r["change"], unit), r["status"]) for row in texts)
    if explained.memory_changed is not None:
        for part in explained.memory_changed["parts"][:3]:
            assert (part["words"], units.nbytes(part["change_bytes"], signed=True)) in {
                row[:2] for row in texts
            }
        for v in explained.memory_changed["variables"]["rows"]:
            assert (units.nbytes(v["change_bytes"], signed=True), v["status"], v["name"]) in texts


def test_html_page_figures_are_the_json(capsys, tmp_path, pair):
    page_path = tmp_path / "diff.html"
    code, out, err = run(capsys, "diff", *pair, "--no-gate", "--format", "html", "-o", page_path)
    assert code == 0 and out == "" and "wrote" in err
    code, out, _ = run(capsys, "diff", *pair, "--no-gate", "--format", "json")
    doc = json.loads(out)
    page = page_path.read_text("utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    cells = parse(page)
    assert not {"script", "link", "img", "iframe"} & set(cells.tags)  # self-contained, nothing to fetch
    metrics = {m["name"]: m for m in doc["metrics"]}
    rows = [(cls, c) for cls, c in cells.rows if len(c) == 6 and "data-value" in c[1][1]]
    changed = [m for m in doc["metrics"] if m["status"] != "unchanged"]
    assert sorted(c[0][0] for _, c in rows) == sorted(m["name"] for m in changed)
    for cls, c in rows:
        m = metrics[c[0][0]]
        for (text, attrs), key in zip(c[1:5], ("base", "new", "abs_change", "rel_change"), strict=True):
            value = m[key]
            if value is None:
                assert attrs["data-value"] == ""
                continue
            # exact; the JSON rounds times to the nanosecond (io/jsonout.py)
            assert float(attrs["data-value"]) == pytest.approx(value, rel=1e-12, abs=5e-4)
            if key == "rel_change":
                assert text == units.relative(value)
            elif key == "abs_change":
                assert text == units.change(value, m["unit"])
            else:
                assert text == units.value(value, m["unit"])
        assert (cls == "worse") == bool(m["worse"])
        assert ("worse" in c[5][0]) == bool(m["worse"])
    # What changed: the window's line and the parts as the JSON has them
    wc = doc["what_changed"]
    assert units.change(wc["window"]["change_us"], "us") in page
    part_rows = {tuple(t for t, _ in c[:2]) for _, c in cells.rows}
    for part in wc["parts"][:3]:
        assert (part["words"], units.change(part["change_us"], "us")) in part_rows
    if "memory_changed" in doc:
        for part in doc["memory_changed"]["parts"][:3]:
            assert (part["words"], units.nbytes(part["change_bytes"], signed=True)) in part_rows
    # the programs or events table: each listed name with its change, as the JSON's top rows
    for section in ("programs", "events"):
        if section not in doc or not doc[section].get("top"):
            continue
        shown = {c[0][1].get("title"): [t for t, _ in c] for _, c in cells.rows if c and c[0][1].get("title")}
        for r in doc[section]["top"]:
            assert r["name"] in shown
            assert shown[r["name"]][3] == units.change(r["change"], "" if section == "programs" else "us")


def test_html_gate_verdict_and_exit_codes(capsys, tmp_path):
    page_path = tmp_path / "gate.html"
    code, _, _ = run(capsys, "diff", *MK2, "--format", "html", "-o", page_path)
    assert code == 1  # the default budget fails: as every other format
    page = page_path.read_text("utf-8")
    assert 'class="verdict fail"' in page and "gate FAIL" in page
    code, _, _ = run(capsys, "diff", *MK2, "--format", "text")
    assert code == 1
    code, out, _ = run(capsys, "diff", *MK2, "--format", "html", "--no-gate")
    assert code == 0 and "gate FAIL" not in out and 'class="worse"' in out
    code, out, _ = run(capsys, "diff", *HTA, "--format", "html")
    assert code == 0 and 'class="verdict pass"' in out


def test_html_bad_input_is_one_line_exit_2_and_no_file(capsys, tmp_path):
    page_path = tmp_path / "out" / "diff.html"
    page_path.parent.mkdir()
    code, out, err = run(
        capsys, "diff", MK2[0], tmp_path / "missing.popprof", "--format", "html", "-o", page_path
    )
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert list(page_path.parent.iterdir()) == []
    bad_budget = tmp_path / "budget.toml"
    bad_budget.write_text("this is [not toml")
    page_path.write_text("the previous page")
    code, _, err = run(capsys, "diff", *MK2, "--format", "html", "--budget", bad_budget, "-o", page_path)
    assert code == 2 and "Traceback" not in err
    assert page_path.read_text() == "the previous page"  # untouched: the write is atomic and came never
    assert [p.name for p in page_path.parent.iterdir()] == ["diff.html"]


def test_html_escapes_hostile_names(capsys, tmp_path):
    new = popprof.open(MK2[1]).copy()
    steps = new.steps.copy()
    old_name = "encoder/layer_10/intermediate/Add_383/ExchangePre"
    steps["program"] = steps["program"].astype(str).replace(old_name, EVIL)
    new.set_table("steps", steps)
    variables = new.variables.copy()
    variables["name"] = variables["name"].astype(str).str.replace("weights_v2", EVIL, regex=False)
    new.set_table("variables", variables)
    hostile = bundle.write(new, tmp_path / "hostile.popprof")
    code, out, _ = run(capsys, "diff", MK2[0], hostile, "--format", "html", "--no-gate")
    assert code == 0
    assert "<script" not in out
    assert "&lt;script&gt;alert(" in out  # shown, escaped
    cells = parse(out)
    assert "script" not in cells.tags
    names = [t for _, c in cells.rows for t, _ in c]
    assert EVIL in names  # the program, read back as the text it was
    assert f"encoder/layer_0/attention/self/{EVIL}" in names  # the variable the memory block names
    explained = popprof.explain(popprof.diff(popprof.open(MK2[0]), popprof.open(hostile)))
    assert "<script" not in explained._repr_html_()


def test_html_run_directories_one_section_per_engine(capsys, tmp_path):
    training, inference, bigger = two_engines()
    old, new = tmp_path / "old", tmp_path / "new"
    for root, first in ((old, training), (new, bigger)):
        bundle.write(first, root / "training")
        bundle.write(inference, root / "inference")
    bundle.write(inference, new / "validation")
    code, out, _ = run(capsys, "diff", old, new, "--format", "html")
    assert code == 1  # the training engine's gate fails
    assert out.count('<section class="diff">') == 2
    assert "Engine <code>inference</code>" in out and "Engine <code>training</code>" in out
    assert "note: only in new: validation" in out
    assert 'class="verdict fail"' in out and 'class="verdict pass"' in out
