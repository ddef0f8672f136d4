"""Issue 41 item 4, "readable where people read it": `popprof check` text wraps at 80 columns when piped (or
`COLUMNS`), a terminal gets a brief view, `where` lists one device, thread or phase a line, and every findings
format shows a finding's estimated gain."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner
from real_inputs import REAL, real_inputs

import popprof
from popprof.cli import cli
from popprof.cli.common import PIPED_WIDTH, text_width
from popprof.markup import render
from popprof.report.findings import finding_lines, render_junit, render_markdown, render_text
from popprof.rules import Finding, Findings, check
from popprof.rules.base import Gain

NCCL = REAL / "traces" / "nccl_data.json.gz"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _real_inputs() -> list[Path]:
    """Every real trace and Poplar summary or log, the rank files of a run one by one and as the run."""
    return real_inputs(ranks_one_by_one=True)


@pytest.fixture
def no_columns(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.mark.parametrize("path", _real_inputs(), ids=lambda p: p.relative_to(REAL).as_posix())
def test_piped_check_of_every_real_input_fits_100_columns(path, no_columns):
    result = CliRunner().invoke(cli, ["check", str(path), "--fail-on", "never"])
    assert result.exit_code == 0, result.output[-2000:]
    # the findings (stdout); a reader's warning on stderr stays one line per source (docs/figures.md)
    widest = max(result.stdout.splitlines(), key=len)
    assert len(widest) <= PIPED_WIDTH <= 100, widest


@pytest.fixture(scope="module")
def nccl() -> Findings:
    found = check(popprof.open(NCCL))
    found.profile_name = "nccl_data"
    return found


def test_piped_text_keeps_every_word_of_every_message(nccl, no_columns):
    text = " ".join(render_text([nccl]).split())
    for f in nccl.items:
        assert " ".join(f.message.split()) in text
        assert " ".join(f.advice.split()) in text or f.severity == "info"
    assert "[...]" not in text


def test_where_lists_one_device_thread_or_phase_a_line(nccl):
    gaps = next(f for f in nccl.items if f.rule_id == "host.device-gaps")
    lines = finding_lines(gaps)
    lines = lines[next(i for i, line in enumerate(lines) if "where: " in line) :]  # the where block on
    for thread in gaps.where["threads"]:
        assert sum(line.strip().endswith(thread) for line in lines) == 1
    heavy = next(f for f in nccl.items if f.rule_id == "exchange.phases")
    lines = finding_lines(heavy)
    phase = re.compile(r"\s+(where: )?(phases\s+)?\+[\d.]+ ms to \+[\d.]+ ms( \(worst\))?")
    phases = [line for line in lines if phase.fullmatch(line)]
    assert len(phases) == len(heavy.where["phases"]) == 5
    assert sum(line.endswith("(worst)") for line in phases) == 1


def _priced(found: Findings) -> Findings:
    """The NCCL findings, each with a gain of 12.30 ms of a 220 ms window and a long basis."""
    for f in found.items:
        f.estimated_gain = Gain(
            12_300.0,
            "us",
            "the exchange not overlapped by compute in the listed phases, if it were hidden entirely",
            whole=220_000.0,
        )
    return found


def _first_four(found: Findings) -> Findings:
    """The first 4 findings (the NCCL trace has 4 today; a new rule may add more)."""
    assert len(found.items) >= 4
    return Findings(found.items[:4], not_evaluated=found.not_evaluated, profile_name=found.profile_name)


def test_an_80_column_terminal_shows_the_nccl_findings_in_under_40_lines(nccl):
    for four in (_first_four(nccl), _first_four(_priced(check(popprof.open(NCCL))))):
        text = ANSI.sub("", render_text([four], rich=True, width=80))
        lines = text.splitlines()
        assert len(lines) <= 40, text
        assert max(len(line) for line in lines) <= 80
        assert all(f.title in text for f in four.items)
        assert lines[-1] == "[...]: cut to fit the terminal (--full shows all)"
    full = ANSI.sub("", render_text([nccl], rich=True, width=80, brief=False))
    assert "[...]" not in full and len(full.splitlines()) > 40


def test_json_keeps_every_name_and_message_whole(no_columns):
    result = CliRunner().invoke(cli, ["check", str(NCCL), "--fail-on", "never", "--format", "json"])
    findings = json.loads(result.output)["profiles"][0]["findings"]
    kernel = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
    phases = next(f for f in findings if f["rule_id"] == "exchange.phases")
    assert phases["where"]["programs"] == [kernel]  # whole, for tools
    # a sentence names the kernel by its callable (io.names.kernel_words), five phases, five times
    assert (
        phases["message"].count("ncclKernel_AllReduce_RING_LL_Sum_float ") == 5
        and kernel not in phases["message"]
    )
    assert max(len(f["message"]) for f in findings) > 800  # the whole message, on one line


def test_width_comes_from_columns_else_80_when_piped(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert text_width(terminal=False) == 80
    monkeypatch.setenv("COLUMNS", "132")
    assert text_width(terminal=False) == 132 and text_width(terminal=True) == 132
    monkeypatch.setenv("COLUMNS", "wide")
    assert text_width(terminal=False) == 80
    result = CliRunner().invoke(cli, ["check", str(NCCL), "--fail-on", "never"], env={"COLUMNS": "60"})
    assert max(len(line) for line in result.output.splitlines()) <= 60


# -- gains in every format ----------------------------------------------------------------------


def _findings() -> Findings:
    time = Finding(
        "host.device-gaps",
        "error",
        "Device idle waiting on the host",
        "rank 0 gpu:0: idle 150.23 ms",
        where={"devices": ["rank 0 gpu:0", "rank 1 gpu:1"]},
        advice="Feed the GPU.",
        estimated_gain=Gain(12_300.0, "us", "the idle gaps the host caused", whole=220_000.0),
    )
    memory = Finding(
        "memory.headroom",
        "warning",
        "Little memory headroom",
        "tile 3 is 97 % full",
        advice="Use less memory.",
        estimated_gain=Gain(
            1_048_576.0, "bytes", "the bytes over the headroom", whole=4_194_304.0, of="tile 3's capacity"
        ),
    )
    unpriced = Finding("exchange.share", "info", "Exchange share", "24.9 % exchange")
    return Findings(
        [time, memory, unpriced], evaluated=[f.rule_id for f in (time, memory, unpriced)], profile_name="p"
    )


TIME_GAIN = "up to 12.30 ms (5.6 % of the devices' windows) - the idle gaps the host caused"
MEMORY_GAIN = "up to 1,048,576 B (1 MiB) (25.0 % of tile 3's capacity) - the bytes over the headroom"


def test_text_shows_each_gain_and_nothing_for_a_finding_without_one():
    text = render_text([_findings()], width=200)
    assert f"gain: {TIME_GAIN}" in text and f"gain: {MEMORY_GAIN}" in text
    assert text.count("gain:") == 2
    narrow = render_text([_findings()], width=50)
    assert max(len(line) for line in narrow.splitlines()) <= 50
    assert " ".join(TIME_GAIN.split()) in " ".join(narrow.split())


def test_markdown_has_a_gain_column_when_a_finding_is_priced():
    out = render_markdown([_findings()])
    header = next(line for line in out.splitlines() if line.startswith("| severity"))
    assert header == "| severity | rule | finding | estimated gain | where |"
    assert TIME_GAIN in out and MEMORY_GAIN in out
    row = next(line for line in out.splitlines() if "exchange.share" in line)
    assert row.count("|") == 6  # an empty gain cell
    unpriced = Findings([_findings().items[2]], profile_name="q")
    assert "estimated gain" not in render_markdown([unpriced])


def test_junit_failure_text_has_the_gain():
    root = ET.fromstring(render_junit([_findings()], "warning"))
    failures = {
        case.get("name"): case.find("failure").text
        for case in root.iter("testcase")
        if case.find("failure") is not None
    }
    assert f"gain: {TIME_GAIN}" in failures["host.device-gaps"]
    assert f"gain: {MEMORY_GAIN}" in failures["memory.headroom"]


def test_html_report_and_notebook_template_show_the_gain():
    from popprof.report.html import findings_context

    items = findings_context(_findings())["items"]
    assert [i["gain"] for i in items] == [TIME_GAIN, MEMORY_GAIN, ""]
    found = _findings()
    html = render(
        "findings.html.j2",
        profile="p",
        findings=found.items,
        not_evaluated=[],
        colours={"error": "red", "warning": "orange", "info": "blue"},
        gains=[TIME_GAIN, MEMORY_GAIN, ""],
    )
    assert "<th>estimated gain</th>" in html and "up to 12.30 ms (5.6 % of the devices&#39; windows)" in html
    # Findings._repr_html_ (rules/base.py) renders the same template, with or without ``gains``
    assert "tile 3 is 97 % full" in found._repr_html_()


def test_units_gain_phrase():
    from popprof.io import units

    assert units.gain(1_000.0, "us") == "up to 1.00 ms"
    assert units.gain(300.0, "us", 200.0) == "up to 300.0 us (100.0 % of the window)"  # never above 100 %
    assert units.gain(2048, "bytes", 8192, "b") == "up to 2,048 B (2 KiB) (25.0 % of the memory) - b"
    assert (
        units.gain(50.0, "us", 200.0, of="rank 1 gpu:1's window")
        == "up to 50.0 us (25.0 % of rank 1 gpu:1's window)"
    )


def test_a_gain_names_its_whole_in_every_rendering():
    """A gain's words for its whole come from one place (``Gain.whole_words``): a device's window, the devices'
    windows pooled, a tile's capacity (or its bytes when above it), a name the rule gave; the same words in
    the text of the findings, their JSON (``of``), the summary's opportunities and the notebook's table."""
    from html import unescape

    from popprof.report.explain import _gain_text
    from popprof.report.findings import gain_text
    from popprof.rules.base import Finding, Findings, Gain, tile_whole

    assert Gain(5.0, "us", "b", whole=20.0, device="rank 1 gpu:1").whole_words == "rank 1 gpu:1's window"
    assert Gain(5.0, "us", "b", whole=20.0).whole_words == "the devices' windows"
    assert tile_whole("tile 289", 600.0, 624.0) == "tile 289's capacity"
    assert (
        tile_whole("tile 289", 700.0, 624.0) == tile_whole("tile 289", 700.0, None) == "the bytes on tile 289"
    )
    memory = Gain(256.0, "bytes", "b", whole=1024.0, of=tile_whole("tile 7", 900.0, 1024.0))
    assert memory.to_dict()["of"] == "tile 7's capacity"
    for gain, words in (
        (Gain(5.0, "us", "b", whole=20.0, device="rank 1 gpu:1"), "(25.0 % of rank 1 gpu:1's window)"),
        (memory, "(25.0 % of tile 7's capacity)"),
    ):
        finding = Finding("r.x", "info", "T", "m", estimated_gain=gain)
        html = unescape(Findings([finding], profile_name="p")._repr_html_())
        assert words in gain_text(finding) and words in _gain_text(gain.to_dict()) and words in html
