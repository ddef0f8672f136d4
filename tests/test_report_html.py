"""The HTML report: opens, is self-contained, escapes text, and contains every finding."""

from __future__ import annotations

import base64
import hashlib
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markupsafe import escape

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import popprof  # noqa: E402
from popprof.cli import main  # noqa: E402
from popprof.plots import available_kinds  # noqa: E402
from popprof.report import html as htmlreport  # noqa: E402
from popprof.testing import synth  # noqa: E402

EVIL = "<script>alert('x')</script>&amp;"


class Collector(HTMLParser):
    """Collects tags, link-like attributes and text; records unclosed structure."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.links: list[str] = []
        self.images: list[str] = []
        self.text: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "script":
            self.scripts += 1
        for name, value in attrs:
            if name in {"src", "href", "xlink:href", "action", "data"} and value:
                self.links.append(value)
            if tag == "img" and name == "src":
                self.images.append(value)

    def handle_data(self, data):
        self.text.append(data)


def parse(text: str) -> Collector:
    parser = Collector()
    parser.feed(text)
    parser.close()
    return parser


@pytest.fixture(scope="module")
def profile():
    p = synth.make_profile(num_ipus=1, oom_tiles=3, num_steps=600, num_liveness_steps=200, seed=8)
    live = p.liveness.copy()
    live.loc[live["not_always_live_bytes"].idxmax(), "program"] = EVIL  # the peak program's name is hostile
    p.set_table("liveness", live)
    return p


def assert_self_contained(doc: Collector) -> None:
    assert doc.scripts == 0
    for link in doc.links:
        assert not link.lower().startswith(("http:", "https:", "//", "ftp:", "file:")), link
        assert link.startswith(("data:image/png;base64,", "#")), link


def test_report_has_summary_findings_and_plots(profile):
    findings = popprof.check(profile)
    assert findings.items
    text = htmlreport.render(profile, findings)
    doc = parse(text)
    assert_self_contained(doc)
    body = "".join(doc.text)  # the parser has already decoded character references
    for f in findings.items:
        assert f.rule_id in body
        assert f.message in body
    for rule_id, reason in findings.not_evaluated:
        assert rule_id in body and reason in body
    assert "Key metrics" in body and "memory.max_tile_incl_gaps_bytes" in body
    kinds = available_kinds(profile)
    assert len(doc.images) == len(kinds) == 7  # the six of the tables and the time account
    for src in doc.images:
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    # escaped, never raw
    assert "<script>" not in text and str(escape(EVIL)) in text
    assert any(EVIL in f.message for f in findings.items)


def test_svg_report_is_self_contained(profile):
    text = htmlreport.render(profile, image_format="svg", title="svg <b>report</b>")
    doc = parse(text)
    assert doc.tags.count("svg") == len(available_kinds(profile))
    assert_self_contained(doc)
    assert "<!DOCTYPE svg" not in text and "<?xml" not in text
    assert "svg &lt;b&gt;report&lt;/b&gt;" in text


def test_report_without_plots_or_rules(profile):
    text = htmlreport.render(
        [profile, synth.make_profile(name="second", execution=False, debug=False)], plots=False
    )
    doc = parse(text)
    assert not doc.images
    assert doc.tags.count("section") == 2


def test_report_without_matplotlib(profile, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    text = htmlreport.render(profile)
    assert "plots need matplotlib: pip install 'popprof[plots]'" in "".join(parse(text).text)
    assert not parse(text).images


def tree_digest(path: Path) -> str:
    digest = hashlib.sha256()
    for item in sorted(path.rglob("*")):
        digest.update(str(item.relative_to(path)).encode())
        if item.is_file():
            digest.update(item.read_bytes())
    return digest.hexdigest()


def test_cli_report(tmp_path, profile):
    bundle = tmp_path / "in.popprof"
    popprof.export(profile, str(bundle))
    before = tree_digest(bundle)
    out = tmp_path / "out" / "report.html"
    assert main(["report", str(bundle), "-o", str(out)]) == 0
    assert tree_digest(bundle) == before
    doc = parse(out.read_text(encoding="utf-8"))
    assert_self_contained(doc)
    assert len(doc.images) == 7
    assert sorted(p.name for p in out.parent.iterdir()) == ["report.html"]  # no temporary left behind


def test_cli_report_bad_input(tmp_path, capsys):
    bad = tmp_path / "junk.json"
    bad.write_text("this is not a profile")
    out = tmp_path / "r.html"
    assert main(["report", str(bad), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "junk.json" in err and "Traceback" not in err
    assert not out.exists() and list(tmp_path.iterdir()) == [bad]
