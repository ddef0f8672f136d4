"""The .pvti reader through the pva test double: walking, probing, SDK missing, ParaView files."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from popprof.model.errors import InputError, SdkMissingError
from popprof.readers import detect, pvti, read_path

sys.path.insert(0, str(Path(__file__).resolve().parent / "pva_double"))
from trace_store import write_trace  # noqa: E402

sys.path.pop(0)


def _thread(tid: int, rows: list[list]) -> dict:
    return {"tid": tid, "events": rows}


def _many_threads_trace(path: Path, omit: tuple[str, ...] = ()) -> Path:
    threads = []
    for tid in range(40):
        rows = [
            ["Engine::run(main)", 100.0, 1000.0 * tid, "Poplar", -1],
            ["StreamCopy in", 10.0, 1000.0 * tid, "Poplar", 0],  # shares its parent's start
            ["marker", 0.0, 1000.0 * tid + 10, "Framework", 0],  # instant
            ["Sync", 5.0, 1000.0 * tid + 50, "Drivers", 0],
            ["host work", 40.0, 1000.0 * tid + 200, "MyApp", -1],
        ]
        threads.append(_thread(tid, rows))
    deep = [[f"scope {d}", 10000.0 - d, 5.0 + d, "MyApp", d - 1] for d in range(3000)]
    threads.append(_thread(999, deep))
    return write_trace(path, [{"pid": 7, "threads": threads}, {"pid": 8, "threads": [_thread(1, [])]}], omit)


def test_walks_threads_nesting_and_channels(tmp_path: Path, pva_double) -> None:
    path = _many_threads_trace(tmp_path / "run_7.pvti")
    assert detect(path) is pvti
    p = read_path(path)
    ev = p.events
    assert len(ev) == 40 * 5 + 3000
    assert p.target_value("source_format") == "pvti"
    deep = ev[ev["tid"] == 999].sort_values("depth")
    assert deep["depth"].tolist() == list(range(3000))  # iterative: no recursion limit
    assert deep["parent_id"].iloc[1:].tolist() == deep["event_id"].iloc[:-1].tolist()
    t3 = ev[ev["tid"] == 3].reset_index(drop=True)
    assert t3["name"].astype(str).tolist() == [
        "Engine::run(main)",
        "StreamCopy in",
        "marker",
        "Sync",
        "host work",
    ]
    assert t3["depth"].tolist() == [0, 1, 1, 1, 0]
    assert t3["parent_id"].iloc[1:4].tolist() == [t3["event_id"].iloc[0]] * 3
    assert t3["start_us"].tolist() == [3000.0, 3000.0, 3010.0, 3050.0, 3200.0]
    assert t3["dur_us"].iloc[2] == 0.0
    assert t3["channel"].astype(str).tolist() == ["Poplar", "Poplar", "Framework", "Drivers", "MyApp"]
    cats = t3["device_category"].astype(object).tolist()
    assert cats[0] == "compute" and cats[1] == "host_io" and cats[3] == "sync"
    assert pd.isna(cats[2]) and pd.isna(cats[4])  # Framework / MyApp events are host events
    assert json.loads(p.meta["pvti.missing_attributes"]) == []
    # a thread without events still appears, per process
    assert set(map(tuple, p.threads[["pid", "tid"]].to_numpy().tolist())) >= {(8, 1), (7, 999)}


def test_missing_timestamp_and_channel_are_reported(tmp_path: Path, pva_double) -> None:
    path = _many_threads_trace(tmp_path / "bare.pvti", omit=("timestamp", "channel"))
    p = read_path(path)
    ev = p.events
    assert ev["start_us"].notna().all() and ev["channel"].isna().all()
    assert ev["dur_us"].notna().all() and ev["depth"].max() == 2999  # what exists still loads
    t3 = ev[ev["tid"] == 3]
    assert t3["name"].astype(str).tolist() == [
        "Engine::run(main)",
        "StreamCopy in",
        "marker",
        "Sync",
        "host work",
    ]
    # no timestamp: laid out from durations and nesting (children from the parent's start, siblings back to back)
    assert t3["start_us"].tolist() == [0.0, 0.0, 10.0, 10.0, 100.0]
    assert (t3["parent_id"].iloc[1:4] == t3["event_id"].iloc[0]).all()
    meta = p.meta
    assert json.loads(meta["pvti.missing_attributes"]) == ["timestamp", "channel"]
    assert meta["pvti.events_without_timestamp"] == str(len(ev))
    assert meta["pvti.start_synthesised"] == str(len(ev))
    assert "laid out from durations and nesting" in meta["pvti.note"]
    assert json.loads(meta["pvti.event_attributes"]) == ["children", "duration", "label"]


def test_device_map_override_for_pvti(tmp_path: Path, pva_double) -> None:
    path = _many_threads_trace(tmp_path / "x.pvti")
    ev = read_path(path, device_map={"compute": r"^MyApp:host"}).events
    host = ev[ev["name"] == "host work"]
    assert (host["device_category"].astype(str) == "compute").all()


def test_sdk_missing(tmp_path: Path, monkeypatch) -> None:
    path = _many_threads_trace(tmp_path / "x.pvti")
    monkeypatch.setitem(sys.modules, "pva", None)  # import pva fails
    with pytest.raises(SdkMissingError, match="pva module"):
        read_path(path)


def test_paraview_file_is_rejected(tmp_path: Path, pva_double) -> None:
    path = tmp_path / "image.pvti"
    path.write_text('<?xml version="1.0"?>\n<VTKFile type="PImageData" version="0.1">\n</VTKFile>\n')
    with pytest.raises(InputError, match="ParaView"):
        read_path(path)


def test_unreadable_trace_is_an_input_error(tmp_path: Path, pva_double) -> None:
    path = tmp_path / "corrupt.pvti"
    path.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    assert pvti.sniff(path, path.read_bytes())
    with pytest.raises(InputError, match="pva cannot open"):
        read_path(path)


def test_fixture_trace(fixtures_dir: Path, pva_double) -> None:
    p = read_path(fixtures_dir / "traces" / "poptorch_4532.pvti")
    ev = p.events
    runs = ev[ev["name"] == "Engine::run(main)"]
    assert len(runs) == 8 and (runs["depth"] == 1).all()
    assert (ev[ev["name"] == "Compiling graph"]["device_category"].isna()).all()
    assert ev["depth"].max() == 59


def test_bad_durations_are_counted_and_kept_sane(tmp_path: Path, pva_double) -> None:
    path = write_trace(
        tmp_path / "odd.pvti",
        [
            {
                "pid": 1,
                "threads": [
                    _thread(
                        1,
                        [
                            ["ok", 5.0, 0.0, "Poplar", -1],
                            ["negative", -3.0, 10.0, "Poplar", -1],
                            ["not a number", "soon", 20.0, "Poplar", -1],
                        ],
                    )
                ],
            }
        ],
    )
    p = read_path(path)
    ev = p.events.set_index(p.events["name"].astype(str))
    assert ev.loc["ok", "dur_us"] == 5.0
    assert ev.loc["negative", "dur_us"] == 0.0  # clamped, never negative
    assert pd.isna(ev.loc["not a number", "dur_us"])  # unknown stays unknown
    assert p.meta["warnings.bad_duration"] == "2"
    assert ev["start_us"].tolist() == [0.0, 10.0, 20.0]


def test_only_the_channel_missing(tmp_path: Path, pva_double) -> None:
    path = write_trace(
        tmp_path / "nochan.pvti",
        [
            {
                "pid": 1,
                "threads": [_thread(1, [["a", 5.0, 100.0, "Poplar", -1], ["b", 1.0, 101.0, "Poplar", 0]])],
            }
        ],
        omit=("channel",),
    )
    p = read_path(path)
    assert p.events["start_us"].tolist() == [100.0, 101.0] and p.events["channel"].isna().all()
    assert json.loads(p.meta["pvti.missing_attributes"]) == ["channel"]
    assert p.meta["pvti.events_without_channel"] == "2"
    assert "pvti.note" not in p.meta and "pvti.events_without_timestamp" not in p.meta


def test_trace_without_events_is_an_input_error(tmp_path: Path, pva_double) -> None:
    path = write_trace(
        tmp_path / "idle.pvti", [{"pid": 1, "threads": [_thread(1, [])]}, {"pid": 2, "threads": []}]
    )
    with pytest.raises(InputError, match="holds no events"):
        read_path(path)


def test_depth_beyond_int16_is_clamped_not_wrapped(tmp_path: Path, pva_double) -> None:
    deep = [[f"scope {d}", 1e6 - d, float(d), "MyApp", d - 1] for d in range(33_000)]
    p = read_path(write_trace(tmp_path / "deep.pvti", [{"pid": 1, "threads": [_thread(1, deep)]}]))
    depth = p.events["depth"]
    assert depth.min() == 0 and depth.max() == 32_767  # int16 saturates; a wrap would go negative
    assert (depth.iloc[:32_768].to_numpy() == range(32_768)).all()


def test_double_trace_lookups_by_pid_and_tid(tmp_path: Path, pva_double) -> None:
    trace = pva_double.openTrace(_many_threads_trace(tmp_path / "x.pvti"))
    assert [p.pid for p in trace.processes] == [7, 8] and len(trace.process(7).threads) == 41
    thread = trace.process(7).thread(3)
    assert thread.tid == 3 and [e.label for e in thread.events] == ["Engine::run(main)", "host work"]
    assert [c.label for c in thread.events[0].children()] == ["StreamCopy in", "marker", "Sync"]
    with pytest.raises(IndexError, match="no process 9"):
        trace.process(9)
    with pytest.raises(IndexError, match="no thread 5"):
        trace.process(8).thread(5)


def test_event_attributes_found_are_recorded_once(tmp_path: Path, pva_double) -> None:
    p = read_path(_many_threads_trace(tmp_path / "full.pvti"))
    assert json.loads(p.meta["pvti.event_attributes"]) == [
        "channel",
        "children",
        "duration",
        "label",
        "timestamp",
    ]
    assert "pvti.start_synthesised" not in p.meta and "pvti.note" not in p.meta


def test_durations_are_whole_microseconds(tmp_path: Path, pva_double) -> None:
    path = write_trace(
        tmp_path / "frac.pvti",
        [
            {
                "pid": 1,
                "threads": [_thread(1, [["a", 12.7, 0.0, "Poplar", -1], ["b", 3.0, 20.0, "Poplar", -1]])],
            }
        ],
    )
    p = read_path(path)
    assert p.events["dur_us"].tolist() == [13.0, 3.0]
    assert p.meta["pvti.non_integer_durations"] == "1"


def test_64_bit_thread_ids(tmp_path: Path, pva_double) -> None:
    pthread_id = 140_245_324_580_672  # a typical Linux pthread id: beyond 32 bits
    unsigned = (1 << 64) - 5  # an id only an unsigned 64-bit integer holds
    path = write_trace(
        tmp_path / "tids.pvti",
        [
            {
                "pid": 4532,
                "threads": [
                    _thread(pthread_id, [["a", 5.0, 0.0, "Poplar", -1]]),
                    _thread(unsigned, [["b", 5.0, 1.0, "Poplar", -1]]),
                ],
            }
        ],
    )
    p = read_path(path)
    assert sorted(p.events["tid"].tolist()) == sorted([pthread_id, -5])
    assert p.meta["pvti.tid_wrapped"] == "1"
    assert len(p.threads) == 2


def test_pva_without_open_trace_needs_sdk_3(tmp_path: Path, pva_double, monkeypatch) -> None:
    path = _many_threads_trace(tmp_path / "old_sdk.pvti")
    monkeypatch.delattr(pva_double, "openTrace")  # SDK 2.0's pva-python page lists no openTrace
    with pytest.raises(InputError, match="needs SDK 3.0 or later"):
        read_path(path)


def test_import_pva_runtime_error_means_sdk_missing(tmp_path: Path, monkeypatch) -> None:
    broken = tmp_path / "broken_sdk" / "pva"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise RuntimeError('libpva.so: cannot open shared object file')\n")
    monkeypatch.syspath_prepend(str(broken.parent))
    monkeypatch.delitem(sys.modules, "pva", raising=False)
    path = _many_threads_trace(tmp_path / "t.pvti")
    with pytest.raises(SdkMissingError):
        read_path(path)
    monkeypatch.delitem(sys.modules, "pva", raising=False)
