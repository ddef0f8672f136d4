"""Issue 28: the HTML report carries every section ``summary`` has for its source.

Checked by parsing the HTML (no screenshots): a GPU trace's report has the per-device table, the
top kernels and the launch delays; an IPU profile's has the top programs and cycles by category;
the timeline caption claims shading only when something is shaded; several profiles get contents
and a side-by-side table; the templates are package data with autoescaping.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import popprof  # noqa: E402
from popprof.io.words import category_word  # noqa: E402
from popprof.metrics.summary import summarise  # noqa: E402
from popprof.report import html as htmlreport  # noqa: E402
from popprof.report.templating import render_template, template_text  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
GPU_TRACE = FIXTURES / "traces" / "training_loop.json"
IPU_BUNDLE = FIXTURES / "mk2_training.popprof"


class Tables(HTMLParser):
    """Every <table>'s rows of cell texts, by the table's class; the ids and links of the page."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[list[str]]]] = {}
        self.ids: list[str] = []
        self.links: list[str] = []
        self.captions: list[str] = []
        self._table: list[list[str]] | None = None
        self._cell: list[str] | None = None
        self._caption: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.append(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
        if tag == "table":
            self._table = []
            self.tables.setdefault(attrs.get("class") or "", []).append(self._table)
        elif tag == "tr" and self._table is not None:
            self._table.append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = []
        elif tag == "figcaption":
            self._caption = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._table:
            self._table[-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None
        elif tag == "figcaption" and self._caption is not None:
            self.captions.append("".join(self._caption))
            self._caption = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._caption is not None:
            self._caption.append(data)


def parse(text: str) -> Tables:
    parser = Tables()
    parser.feed(text)
    parser.close()
    return parser


def tables_by_class(text: str) -> dict[str, list[list[list[str]]]]:
    """The tables of an HTML page by class (also used by the record tests)."""
    return parse(text).tables


@pytest.fixture(scope="module")
def gpu():
    return popprof.open(GPU_TRACE)


@pytest.fixture(scope="module")
def ipu():
    return popprof.open(IPU_BUNDLE)


def test_gpu_report_has_devices_top_kernels_and_launch_delays(gpu):
    doc = parse(htmlreport.render(gpu, plots=False))
    trace = summarise(gpu)["trace"]
    (devices,) = doc.tables["devices"]
    assert devices[0][:2] == ["rank", "device"]
    assert [row[1] for row in devices[1:]] == [d["device"] for d in trace["devices"]]
    (kernels,) = doc.tables["top-kernels"]
    assert kernels[0][:3] == ["kernel", "type", "count"]
    names = [row[0] for row in kernels[1:]]
    assert names[0] == trace["top_kernels"][0]["name"] == "ampere_sgemm_128x64_tn"
    assert len(names) == len(trace["top_kernels"])
    assert [int(row[2].replace(",", "")) for row in kernels[1:]] == [k["count"] for k in trace["top_kernels"]]
    (launches,) = doc.tables["launch-delays"]
    assert launches[1][1] == "gpu:0" and launches[1][2] == f"{trace['launch_delays'][0]['launches']:,}"


def test_ipu_report_has_top_programs_and_cycles_by_category(ipu):
    doc = parse(htmlreport.render(ipu, plots=False))
    execution = summarise(ipu)["execution"]
    (programs,) = doc.tables["top-programs"]
    assert programs[0] == ["program", "category", "cycles", "share", "steps"]
    assert [row[0] for row in programs[1:]] == [p["program"] for p in execution["top_programs"]]
    (categories,) = doc.tables["cycles-by-category"]
    shown = {row[0] for row in categories[1:]}
    # in the IPU's words: global exchange, stream copies (the codes stay in the JSON)
    assert shown == {category_word(c, "ipu") for c, row in execution["by_category"].items() if row["cycles"]}
    assert "stream copies" in shown and "host_io" not in shown
    assert "devices" in doc.tables  # the per-IPU table of the summary


def test_out_of_memory_log_report_lists_every_failed_compilation():
    """A real Poplar log with three out-of-memory failures: the report's table has a row for each, as summary."""
    log = popprof.open(FIXTURES / "real" / "poplar" / "devito_wave3d_oom_log_mk2.txt")
    doc = parse(htmlreport.render(log, plots=False))
    failures = summarise(log)["memory"]["out_of_memory"]
    (table,) = doc.tables["out-of-memory"]
    assert table[0][:5] == ["compilation", "tile", "needs", "capacity", "over by"]
    assert len(table) - 1 == len(failures) == 3
    assert [row[1] for row in table[1:]] == [f"{f['tile']:,}" for f in failures] == ["14", "0", "0"]
    assert table[1][2].startswith("653,544 B") and table[1][4].startswith("14,568 B")
    (memory,) = doc.tables["memory"]
    # three different graphs: no fullest tile or tile count across them (issue 25 item 9), a row per failure
    assert memory == [
        ["failed compilations", "3 (each its own graph or attempt: figures per compilation, below)"]
    ]


def test_gpu_report_has_the_per_iteration_table(gpu):
    doc = parse(htmlreport.render(gpu, plots=False))
    iterations = summarise(gpu)["iterations"]
    (table,) = doc.tables["iterations"]
    assert table[0] == ["step", "start", "duration"]
    assert [int(row[0]) for row in table[1:]] == [st["step"] for st in iterations["steps"]]
    assert table[1][1] == "0.0 us"  # from the first step, as the text summary shows it


def test_gpu_report_has_idle_causes_cpu_ops_host_waits_and_threads(gpu):
    """Every trace section of the text summary is in the report too, with the same figures."""
    doc = parse(htmlreport.render(gpu, plots=False))
    trace = summarise(gpu)["trace"]
    (idle,) = doc.tables["idle-causes"]
    # HTA's causes under HTA's names, labelled as HTA's: its "host wait" classifies whole gaps, so it is never
    # called "host not submitting", the time account's part that splits each gap at the launch
    assert [row[2] for row in idle[1:]] == ["host wait (HTA)", "kernel wait (HTA)", "other idle"]
    assert [row[4] for row in idle[1:]] == ["77.4 %", "2.8 %", "19.8 %"]  # as `popprof summary` prints them
    (ops,) = doc.tables["top-cpu-ops"]
    assert [row[0] for row in ops[1:]] == [op["name"] for op in trace["top_cpu_ops_by_self"]]
    (waits,) = doc.tables["host-waits"]
    assert waits[1][:2] == ["cudaStreamSynchronize", "12"]
    (threads,) = doc.tables["busiest-threads"]
    assert [row[2] for row in threads[1:]] == [t["thread_name"] for t in trace["busiest_threads"]]
    (activity,) = doc.tables["device-activity"]
    assert {row[0] for row in activity[1:]} == {
        category_word(c, "gpu") for c in trace["device_activity"]["by_category"]
    }


def test_timeline_caption_claims_shading_only_when_something_is_shaded():
    from matplotlib.figure import Figure

    plain = Figure()
    plain.add_subplot().plot([0, 1], [0, 1])
    assert "Shaded" not in htmlreport.caption("timeline", plain)
    assert "Nothing is shaded" in htmlreport.caption("timeline", plain)
    shaded = Figure()
    shaded.add_subplot().axvspan(0.2, 0.4, gid="stall")
    assert "Shaded: device idle gaps" in htmlreport.caption("timeline", shaded)


def test_gpu_report_timeline_caption_matches_the_figure(gpu):
    doc = parse(htmlreport.render(gpu, plots=True))
    (timeline,) = [c for c in doc.captions if c.startswith("Host threads")]
    findings = popprof.check(gpu)
    stalls = [f for f in findings.items if f.rule_id.startswith("host.") and f.where.get("time_us")]
    assert ("Shaded:" in timeline) == bool(stalls)


def test_several_profiles_get_contents_and_a_side_by_side_table(gpu, ipu):
    doc = parse(htmlreport.render([ipu, gpu], plots=False))
    assert "contents" in doc.ids and "side-by-side" in doc.ids
    assert "#profile-1" in doc.links and "#profile-2" in doc.links
    assert {"profile-1", "profile-2"} <= set(doc.ids)
    (side,) = doc.tables["side-by-side"]
    assert side[0] == ["metric", ipu.name, gpu.name]
    metrics = {row[0]: row[1:] for row in side[1:]}
    assert metrics["memory.total_incl_gaps_bytes"][1] == "—"  # the trace has no memory figures
    assert metrics["trace.event_count"][0] == "—"


def test_one_profile_gets_no_contents(ipu):
    doc = parse(htmlreport.render(ipu, plots=False))
    assert "contents" not in doc.ids and "side-by-side" not in doc.tables


def test_the_run_is_shown_when_given(ipu):
    run = {
        "command": "python train.py --x '<b>'",
        "outcome": "exit code 3",
        "duration_us": 2.5e6,
        "started": "",
    }
    text = htmlreport.render(ipu, plots=False, run=run)
    (table,) = parse(text).tables["run"]
    assert table == [
        ["command", "python train.py --x '<b>'"],
        ["exit code", "exit code 3"],
        ["duration", "2.500 s"],
    ]
    assert "--x '<b>'" not in text and "--x &#39;&lt;b&gt;&#39;" in text


def test_templates_are_package_data_and_autoescape():
    assert "<html" in template_text("report.html.j2") and "{%" in template_text("profile.html.j2")
    out = render_template("figure.html.j2", svg=None, png="AAAA", caption="<i>x</i>")
    assert "&lt;i&gt;x&lt;/i&gt;" in out and "<i>" not in out


def test_gpu_report_has_queue_lengths_and_copies_from_the_summary():
    """A real run's queue length per stream and copies by kind: the rows of the summary document's
    ``trace.queue_lengths`` and ``trace.copies`` (one figure, one definition), each row's figures as units
    print them."""
    from popprof.io import units

    run = FIXTURES / "real" / "traces" / "two_ranks"
    profile = popprof.open(run, with_args=True)
    doc = parse(htmlreport.render(profile, plots=False))
    trace = summarise(profile)["trace"]
    (queues,) = doc.tables["queue-lengths"]
    streams = trace["queue_lengths"]["streams"]
    assert len(queues) == 1 + len(streams)
    for row, q in zip(queues[1:], streams, strict=True):
        assert row[1:4] == [q["device"], str(q["stream"]), f"{q['launches']:,}"]
        assert row[6] == units.count(q["max"]) and row[8] == units.duration(q["blocked_us"])
    (copies,) = doc.tables["copies"]
    kinds = trace["copies"]
    assert len(copies) == 1 + len(kinds)
    for row, c in zip(copies[1:], kinds, strict=True):
        assert row[1:3] == [c["device"], c["kind"]]
        assert row[4] == units.nbytes(c["bytes"]) and row[7] == units.duration(c["copies_us"])
    assert "queue-lengths" not in parse(htmlreport.render(popprof.open(IPU_BUNDLE), plots=False)).tables
