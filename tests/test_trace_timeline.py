"""Timeline export: Chrome trace round trip, IPU steps laid out in time, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from popprof.cli import main
from popprof.model.profile import Profile
from popprof.readers import read_path
from popprof.trace import timeline

COLS = [
    "event_id",
    "pid",
    "tid",
    "parent_id",
    "depth",
    "name",
    "channel",
    "start_us",
    "dur_us",
    "device_category",
]


def _plain(frame: pd.DataFrame) -> list[tuple]:
    return [
        tuple(r) for r in frame[COLS].astype(object).where(frame[COLS].notna(), None).itertuples(index=False)
    ]


@pytest.mark.parametrize("name", ["training_loop.json.gz", "begin_end.json"])
def test_round_trip_gives_the_same_events(tmp_path: Path, fixtures_dir: Path, name: str) -> None:
    original = read_path(fixtures_dir / "traces" / name, with_args=True)
    out = tmp_path / "out.json"
    stats = timeline.write_timeline(original, out)
    assert stats.events == len(original.events)
    back = read_path(out, with_args=True)
    assert _plain(back.events) == _plain(original.events)
    assert back.threads.equals(original.threads)
    assert (
        back.counters.sort_values(["ts_us", "series"])
        .reset_index(drop=True)
        .equals(original.counters.sort_values(["ts_us", "series"]).reset_index(drop=True))
    )
    doc = json.loads(out.read_text())
    assert isinstance(doc["traceEvents"], list)
    for ev in doc["traceEvents"]:
        assert {"ph", "pid", "name"} <= set(ev)
        if ev["ph"] in "XiBC":
            assert isinstance(ev["ts"], float | int)


def test_gzip_output(tmp_path: Path, fixtures_dir: Path) -> None:
    p = read_path(fixtures_dir / "traces" / "begin_end.json")
    out = tmp_path / "out.json.gz"
    timeline.write_timeline(p, out)
    assert out.read_bytes()[:2] == b"\x1f\x8b"
    assert len(read_path(out).events) == len(p.events)


def _ipu_profile(with_runs: bool) -> Profile:
    steps = pd.DataFrame(
        {
            "run": [0, 0, 0, 0, 1, 1],
            "step": [0, 0, 1, 1, 2, 2],
            "ipu": [0, 1, 0, 1, 0, 1],
            "program": ["mm", "mm", "exch", "exch", "copy", "copy"],
            "program_type": [
                "OnTileExecute",
                "OnTileExecute",
                "DoExchange",
                "DoExchange",
                "StreamCopyBegin",
                "StreamCopyBegin",
            ],
            "category": ["compute", "compute", "exchange", "exchange", "host_io", "host_io"],
            "cycles": [1330, 2660, 665, 665, 13300, 1330],
        }
    )
    tables = {"target": {"source_format": ["pop"], "clock_hz": [1.33e9]}, "steps": steps}
    if with_runs:
        tables["runs"] = {
            "run": [0, 1],
            "name": ["a", "b"],
            "start_us": [100.0, 500.0],
            "end_us": [105.0, 520.0],
        }
    return Profile("ipu", tables)


@pytest.mark.parametrize("with_runs", [False, True])
def test_steps_are_laid_out_per_ipu_in_time(with_runs: bool) -> None:
    layout = timeline.step_layout(_ipu_profile(with_runs)).set_index(["step", "ipu"])
    # 1.33 GHz: 1330 cycles = 1 us
    assert layout.loc[(0, 0), "dur_us"] == pytest.approx(1.0)
    assert layout.loc[(1, 0), "start_us"] - layout.loc[(0, 0), "start_us"] == pytest.approx(1.0)
    assert layout.loc[(1, 1), "start_us"] - layout.loc[(0, 1), "start_us"] == pytest.approx(2.0)
    run1 = layout.loc[(2, 0), "start_us"]
    if with_runs:
        assert layout.loc[(0, 0), "start_us"] == pytest.approx(100.0)
        assert run1 == pytest.approx(500.0)
    else:
        assert layout.loc[(0, 0), "start_us"] == pytest.approx(0.0)
        assert run1 == pytest.approx(2.5)  # after run 0's longest IPU (2660 + 665 cycles)
    assert layout.loc[(2, 0), "dur_us"] == pytest.approx(10.0)


def test_steps_export_names_ipus_and_categories(tmp_path: Path) -> None:
    out = tmp_path / "ipu.json"
    stats = timeline.write_timeline(_ipu_profile(False), out)
    assert stats.steps == 6
    doc = json.loads(out.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in doc if e["ph"] == "M"}
    assert {"IPU execution", "IPU 0", "IPU 1"} <= names
    steps = [e for e in doc if e["ph"] == "X"]
    assert {e["cat"] for e in steps} == {"compute", "exchange", "host_io"}
    assert all(e["cname"] == timeline.CATEGORY_COLOURS[e["cat"]] for e in steps)
    back = read_path(out)
    assert len(back.events) == 6
    assert sorted(back.events["channel"].astype(str)) == [
        "compute",
        "compute",
        "exchange",
        "exchange",
        "host_io",
        "host_io",
    ]
    assert np.isclose(back.events["dur_us"].sum(), sum([1, 2, 0.5, 0.5, 10, 1]))


def test_cli_timeline(tmp_path: Path, fixtures_dir: Path, capsys) -> None:
    out = tmp_path / "t.json"
    assert main(["timeline", str(fixtures_dir / "traces" / "training_loop.json"), "-o", str(out)]) == 0
    assert len(read_path(out).events) == 1032
    assert (
        main(
            [
                "timeline",
                str(fixtures_dir / "traces" / "begin_end.json"),
                "-o",
                str(out),
                "--device-map",
                '{"compute": "^TraceMe:train_step"}',
            ]
        )
        == 0
    )
    doc = json.loads(out.read_text())["traceEvents"]
    steps = [e for e in doc if e["name"].startswith("train_step")]
    assert len(steps) == 3 and all(e["args"]["device_category"] == "compute" for e in steps)


def test_cli_timeline_bad_input_leaves_no_output(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "na')
    out = tmp_path / "out.json"
    assert main(["timeline", str(bad), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "bad.json" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists() and list(tmp_path.iterdir()) == [bad]
    assert main(["timeline", str(bad), "-o", str(out), "--device-map", '{"gpu": "x"}']) == 2


def test_cli_timeline_reads_the_device_map_from_config(
    tmp_path: Path, fixtures_dir: Path, monkeypatch
) -> None:
    (tmp_path / "popprof.toml").write_text('[device_map]\ncompute = "^TraceMe:ExecutorState"\n')
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "t.json"
    assert main(["timeline", str(fixtures_dir / "traces" / "begin_end.json"), "-o", str(out)]) == 0
    doc = json.loads(out.read_text())["traceEvents"]
    marked = {e["name"] for e in doc if e.get("args", {}).get("device_category") == "compute"}
    assert marked == {"ExecutorState::Process", "MatMul"}


def test_cli_timeline_never_overwrites_its_input(tmp_path: Path, fixtures_dir: Path, capsys) -> None:
    src = tmp_path / "t.json"
    src.write_bytes((fixtures_dir / "traces" / "begin_end.json").read_bytes())
    before = src.read_bytes()
    assert main(["timeline", str(src), "-o", str(src)]) == 2
    assert "overwrite" in capsys.readouterr().err
    assert src.read_bytes() == before


# -- round trip keeps what Perfetto shows: flows, zero-duration complete events, metadata, top level -----

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
REAL_TRACES = [
    "nccl_data.json.gz",
    "amd_mi250_minitoy.json.gz",
    "cpu_only_rank-34.json.gz",
    "two_ranks/rank-0.json.gz",
    "two_ranks/rank-1.json.gz",
]
SYNTHETIC_PID = 1 << 40  # the Chrome reader's ids for string pids ("Spans", "Traces", "") start here


def _load(path: Path) -> dict:
    import gzip

    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rb") as handle:
        return json.loads(handle.read())


def _metadata_keys(events: list[dict]) -> set[tuple]:
    """Distinct metadata records (a repeated thread_name for one thread is one record, as Perfetto shows it)."""
    keys = set()
    for e in events:
        if e.get("ph") != "M" or not isinstance(e.get("pid"), int) or e["pid"] >= SYNTHETIC_PID:
            continue
        thread_level = e["name"].startswith("thread_")
        keys.add((e["name"], e["pid"], e.get("tid") if thread_level else None))
    return keys


@pytest.mark.parametrize("name", REAL_TRACES)
def test_real_trace_round_trip_keeps_every_phase_and_the_top_level(tmp_path: Path, name: str) -> None:
    from collections import Counter

    source = REAL / name
    original = _load(source)
    out = tmp_path / "out.json"
    stats = timeline.write_timeline(read_path(source), out)
    written = _load(out)
    before = Counter(e.get("ph") for e in original["traceEvents"] if e.get("ph") != "M")
    after = Counter(e.get("ph") for e in written["traceEvents"] if e.get("ph") != "M")
    assert after == before  # X, i, s, f, ... one for one
    assert stats.flows == before["s"] + before["f"] + before["t"]
    # metadata: every record of the input (names, labels, sort order) is written again
    assert _metadata_keys(original["traceEvents"]) == _metadata_keys(written["traceEvents"])
    # string pids (Kineto's "Spans"/"Traces") are written as those strings again (issue 25 item 6), each
    # named after itself, and no stand-in number of the reader's is written
    strings = {e["pid"] for e in original["traceEvents"] if isinstance(e.get("pid"), str)}
    assert {e["pid"] for e in written["traceEvents"] if isinstance(e.get("pid"), str)} == strings
    named = {
        e["args"]["name"]
        for e in written["traceEvents"]
        if e.get("ph") == "M" and e["name"] == "process_name" and isinstance(e["pid"], str)
    }
    assert named == strings
    numbers = [e[k] for e in written["traceEvents"] for k in ("pid", "tid") if isinstance(e.get(k), int)]
    assert all(n < SYNTHETIC_PID for n in numbers)
    # top-level members come back as they were
    for key, value in original.items():
        if key != "traceEvents":
            assert written[key] == value, key
    # instants keep their scope (Kineto writes global ones)
    scopes = Counter(e.get("s") for e in original["traceEvents"] if e.get("ph") == "i")
    assert Counter(e.get("s") for e in written["traceEvents"] if e.get("ph") == "i") == scopes


def test_real_flows_survive_reading_the_export_back(tmp_path: Path) -> None:
    original = read_path(REAL / "nccl_data.json.gz")
    out = tmp_path / "out.json.gz"
    timeline.write_timeline(original, out)
    back = read_path(out)
    cols = ["pid", "tid", "ts_us", "phase", "id", "name", "channel", "binding"]
    assert back.flows[cols].astype(object).equals(original.flows[cols].astype(object))
    assert _plain(back.events) == _plain(original.events)
    assert back.threads.equals(original.threads)


def test_zero_duration_complete_events_stay_complete_events(tmp_path: Path) -> None:
    src = tmp_path / "zero.json"
    src.write_text(
        json.dumps(
            {
                "traceEvents": [
                    {"ph": "X", "name": "marker", "pid": 1, "tid": 1, "ts": 10.0, "dur": 0},
                    {"ph": "X", "name": "work", "pid": 1, "tid": 1, "ts": 0.0, "dur": 50.0},
                    {"ph": "i", "name": "tick", "pid": 1, "tid": 1, "ts": 20.0, "s": "p"},
                    {"ph": "i", "name": "epoch", "pid": 1, "tid": 1, "ts": 30.0},
                    {"ph": "I", "name": "legacy", "pid": 1, "tid": 1, "ts": 40.0, "s": "g"},
                ]
            }
        )
    )
    out = tmp_path / "out.json"
    timeline.write_timeline(read_path(src), out)
    written = {e["name"]: e for e in json.loads(out.read_text())["traceEvents"] if e["ph"] != "M"}
    assert written["marker"]["ph"] == "X" and written["marker"]["dur"] == 0
    assert written["work"]["ph"] == "X"
    assert (written["tick"]["ph"], written["tick"]["s"]) == ("i", "p")
    assert (written["epoch"]["ph"], written["epoch"]["s"]) == ("i", "t")
    assert (written["legacy"]["ph"], written["legacy"]["s"]) == ("i", "g")
