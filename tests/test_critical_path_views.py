"""The critical path on the timeline (``timeline --critical-path``) and in the HTML report, on real traces.

The overlay marks exactly the events of :func:`critical_path_edges` and draws one arrow per edge across
threads or streams; everything else is the export without the flag. The report shows the summary
document's figures (:func:`critical_paths`), never figures of its own.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from popprof import open as read_path
from popprof.cli import main
from popprof.io import units
from popprof.metrics.critical_overlay import FLOW_NAME, MARK, critical_path_overlay
from popprof.metrics.critical_path import PARTS, critical_path_edges, critical_paths

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
MULTI_STREAM = REAL / "hta_cuda_event_sync_multi_stream.json.gz"
TWO_RANKS = REAL / "two_ranks"
EVENT_SYNC = REAL / "hta_cuda_event_sync.json.gz"
NO_GPU = REAL / "cpu_only_rank-34.json.gz"
#: The columns an event keeps through an export and a read back.
COLS = ["event_id", "pid", "tid", "parent_id", "depth", "name", "channel", "start_us", "dur_us"]
FLOW_COLS = ["pid", "tid", "ts_us", "phase", "id", "name", "channel", "binding"]


def _plain(frame: pd.DataFrame) -> list[tuple]:
    return [
        tuple(r) for r in frame[COLS].astype(object).where(frame[COLS].notna(), None).itertuples(index=False)
    ]


def _export(tmp_path: Path, trace: Path, *flags: str, name: str = "out.json") -> Path:
    out = tmp_path / name
    assert main(["timeline", str(trace), "-o", str(out), *flags]) == 0
    return out


def _load(path: Path) -> dict:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)


def _without_overlay(doc: dict) -> dict:
    """``doc`` with the overlay's arrows and marks taken out."""
    kept = []
    for event in doc["traceEvents"]:
        if event.get("cat") == FLOW_NAME and event.get("ph") in ("s", "f"):
            continue
        args = event.get("args")
        if isinstance(args, dict) and args.pop(MARK, None) is True and not args:
            del event["args"]
        kept.append(event)
    return {**doc, "traceEvents": kept}


def _across(original, edges: pd.DataFrame) -> pd.DataFrame:
    """The edges across threads or streams, with their events' pid and tid at both ends."""
    where = original.events.set_index("event_id")[["pid", "tid", "start_us", "dur_us"]]
    tail = where.loc[edges["from_event_id"].to_numpy()].reset_index(drop=True).add_prefix("from_")
    head = where.loc[edges["to_event_id"].to_numpy()].reset_index(drop=True).add_prefix("to_")
    both = pd.concat([edges.reset_index(drop=True), tail, head], axis=1)
    across = (both["from_pid"] != both["to_pid"]) | (both["from_tid"] != both["to_tid"])
    return both[across].reset_index(drop=True)


@pytest.mark.parametrize("trace", [MULTI_STREAM, TWO_RANKS, EVENT_SYNC], ids=lambda p: p.name)
def test_the_export_marks_the_path_and_draws_its_edges_across_threads(tmp_path: Path, trace: Path) -> None:
    original = read_path(trace, with_args=True)
    edges = critical_path_edges(original)
    out = _export(tmp_path, trace, "--critical-path")
    doc = _load(out)
    # the event records are the events table's rows (those with a start), in order: the marked ones are
    # exactly the events an edge of the path starts or ends at
    records = [e for e in doc["traceEvents"] if e["ph"] in ("X", "i", "B")]
    ids = original.events.loc[original.events["start_us"].notna(), "event_id"].tolist()
    assert len(records) == len(ids)
    marked = {i for i, e in zip(ids, records, strict=True) if e.get("args", {}).get(MARK) is True}
    assert marked == set(edges["from_event_id"].tolist()) | set(edges["to_event_id"].tolist())
    # one s/f pair per edge across threads or streams, in path order, with ids of their own
    ours = [e for e in doc["traceEvents"] if e.get("cat") == FLOW_NAME]
    starts, finishes = ours[0::2], ours[1::2]
    across = _across(original, edges)
    assert [e["ph"] for e in starts] == ["s"] * len(across) and [e["ph"] for e in finishes] == ["f"] * len(
        across
    )
    assert [e["id"] for e in starts] == [e["id"] for e in finishes]
    theirs = {e["id"] for e in doc["traceEvents"] if e["ph"] in "stf" and e.get("cat") != FLOW_NAME}
    assert len({e["id"] for e in starts}) == len(starts) and not {e["id"] for e in starts} & theirs
    assert all(e["bp"] == "e" for e in finishes) and all("bp" not in e for e in starts)
    for side, rows in (("from", starts), ("to", finishes)):
        assert [(e["pid"], e["tid"]) for e in rows] == list(
            zip(across[f"{side}_pid"], across[f"{side}_tid"], strict=True)
        )
        start = across[f"{side}_start_us"].to_numpy()
        end = start + across[f"{side}_dur_us"].to_numpy()
        at_end = across[f"{side}_end"].to_numpy(dtype=bool)
        ts = np.array([e["ts"] for e in rows], dtype=np.float64)
        # a start node at the event's start; an end node inside the slice, just before its end
        assert np.array_equal(ts[~at_end], start[~at_end])
        assert (ts[at_end] < end[at_end]).all() and (ts[at_end] >= start[at_end]).all()
    # read back: the events of the export without the flag (of the trace itself, from a file), the flows
    # of that export and the path's after them
    back = read_path(out, with_args=True)
    plain = read_path(_export(tmp_path, trace, name="plain.json"), with_args=True)
    assert _plain(back.events) == _plain(plain.events)
    if trace.is_file():
        assert _plain(back.events) == _plain(original.events)
    empty = pd.DataFrame(columns=FLOW_COLS)
    flows = (back.get("flows") if back.has("flows") else empty)[FLOW_COLS].astype(object)
    before = (plain.get("flows") if plain.has("flows") else empty)[FLOW_COLS].astype(object)
    assert flows.iloc[: len(before)].equals(before)
    assert (flows.iloc[len(before) :]["channel"] == FLOW_NAME).all() and len(flows) - len(before) == len(ours)


def test_multi_stream_overlay_counts(tmp_path: Path, capsys) -> None:
    """HTA's multi-stream example: 58 edges of 1178 us, one launch delay the only edge across threads."""
    original = read_path(MULTI_STREAM, with_args=True)
    edges = critical_path_edges(original)
    assert len(edges) == 58 and critical_paths(original)[0]["length_us"] == 1178
    overlay = critical_path_overlay(original)
    assert overlay is not None and len(overlay.flows) == 2 * len(_across(original, edges))
    _export(tmp_path, MULTI_STREAM, "--critical-path")
    err = capsys.readouterr().err
    marked = len(set(edges["from_event_id"]) | set(edges["to_event_id"]))
    assert f"{marked} events marked, 1 arrow across threads and streams" in err


def test_the_overlay_adds_only_marks_and_arrows(tmp_path: Path) -> None:
    plain = _load(_export(tmp_path, TWO_RANKS, name="plain.json"))
    overlaid = _load(_export(tmp_path, TWO_RANKS, "--critical-path", name="path.json"))
    assert overlaid != plain and _without_overlay(overlaid) == plain
    # with --with-args too: the args as read, plus the mark
    plain = _load(_export(tmp_path, MULTI_STREAM, "--with-args", name="plain.json.gz"))
    overlaid = _load(_export(tmp_path, MULTI_STREAM, "--with-args", "--critical-path", name="path.json.gz"))
    assert _without_overlay(overlaid) == plain


def test_without_the_flag_nothing_changes(tmp_path: Path) -> None:
    """Without the flag the command writes what the export of the trace (read without args) always was."""
    from popprof.trace.timeline import write_timeline

    cli = _export(tmp_path, MULTI_STREAM, name="a.json").read_bytes()
    write_timeline(read_path(MULTI_STREAM), tmp_path / "b.json")
    assert (tmp_path / "b.json").read_bytes() == cli
    assert FLOW_NAME.encode() not in cli


def test_no_gpu_work_writes_the_trace_unchanged_with_a_note(tmp_path: Path, capsys) -> None:
    assert critical_path_overlay(read_path(NO_GPU, with_args=True)) is None
    plain = _export(tmp_path, NO_GPU, name="plain.json").read_bytes()
    capsys.readouterr()
    assert _export(tmp_path, NO_GPU, "--critical-path", name="path.json").read_bytes() == plain
    notes = [line for line in capsys.readouterr().err.splitlines() if "critical path" in line]
    assert notes == [
        "popprof: note: no critical path (no GPU work with its launch call in the trace); written unchanged"
    ]


def _section(html: str) -> str:
    start = html.index("<h3>Critical path")
    return html[start : html.index("<h3>", start + 1)]


@pytest.mark.parametrize("trace", [MULTI_STREAM, TWO_RANKS], ids=lambda p: p.name)
def test_the_report_shows_the_summary_documents_critical_path(tmp_path: Path, trace: Path) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(trace), "-o", str(out), "--no-plots", "--critical-path"]) == 0
    section = _section(out.read_text())
    paths = critical_paths(read_path(trace, with_args=True))
    # the figures of `summary --critical-path` (one figure, one definition)
    doc = tmp_path / "summary.json"
    assert main(["summary", str(trace), "--critical-path", "--format", "json", "-o", str(doc)]) == 0
    assert json.loads(doc.read_text())["trace"]["critical_path"] == json.loads(json.dumps(paths))
    rows = section.split("<table", 2)[1].split("<tr>")[2:]
    assert len(rows) == len(paths)
    for row, path in zip(rows, paths, strict=True):
        cells = row.split('<td class="num">')
        assert cells[2].startswith(units.duration(path["length_us"]) + "<")
        for cell, part in zip(cells[3:], PARTS, strict=True):
            shown = f"{units.duration(path['parts_us'][part])} ({units.percent(path['shares'][part])})"
            assert cell.startswith(shown + "<")
            if path["shares"][part]:  # what making the part free would buy, as the summary has it
                assert f"if free: -{units.duration(path['savings_us'][part])}<" in cell
        for top in path["top"]:
            assert f'title="{top["name"]}"' in section
            assert f'<td class="num">-{units.duration(top["saving_us"])}</td>' in section
    assert "Critical path" not in _report(tmp_path, trace)


def _report(tmp_path: Path, trace: Path) -> str:
    out = tmp_path / "plain.html"
    assert main(["report", str(trace), "-o", str(out), "--no-plots"]) == 0
    return out.read_text()


def test_the_report_says_when_there_is_no_critical_path(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(NO_GPU), "-o", str(out), "--no-plots", "--critical-path"]) == 0
    assert "None: no GPU work with its launch call in the trace." in _section(out.read_text())


def test_bad_input_with_the_flag_is_one_line_and_no_output(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "na')
    for command in ("timeline", "report"):
        out = tmp_path / "out"
        assert main([command, str(bad), "-o", str(out), "--critical-path"]) == 2
        err = capsys.readouterr().err
        assert "bad.json" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert not out.exists()


def test_an_ipu_profile_has_no_critical_path_to_draw(tmp_path: Path, fixtures_dir: Path, capsys) -> None:
    """Execution steps, no trace events: the same export, and the note."""
    profile = fixtures_dir / "mk2_training.popprof"
    plain = _export(tmp_path, profile, name="plain.json").read_bytes()
    capsys.readouterr()
    assert _export(tmp_path, profile, "--critical-path", name="path.json").read_bytes() == plain
    assert "popprof: note: no critical path" in capsys.readouterr().err


def test_steps_mark_only_that_steps_path_and_the_report_says_so(tmp_path: Path, capsys) -> None:
    """``--steps`` on the timeline and the report: the overlay of step 4 alone is the edges of step 4's path
    (fewer than the whole trace's), and the report's section names the steps."""
    trace = REAL / "nccl_data.json.gz"
    profile = read_path(trace, with_args=True)
    edges = critical_path_edges(profile, (4, 4))
    whole = critical_path_edges(profile)
    assert 0 < len(edges) < len(whole)
    _export(tmp_path, trace, "--steps", "4")
    marked = len(set(edges["from_event_id"]) | set(edges["to_event_id"]))
    assert f"{marked:,} events marked" in capsys.readouterr().err
    out = tmp_path / "r.html"
    assert main(["report", str(trace), "-o", str(out), "--no-plots", "--steps", "4-5"]) == 0
    assert "<h3>Critical path (HTA's model), steps 4-5 only</h3>" in out.read_text()
    assert main(["timeline", str(trace), "-o", str(tmp_path / "x.json"), "--steps", "9"]) == 2
    assert "its steps: 4, 5" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()
