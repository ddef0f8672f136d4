"""A directory of per-rank Chrome traces (HTA's layout) opens as one profile with every rank."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

import popprof
from popprof.cli import main
from popprof.readers import rank_dir

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
TWO_RANKS = REAL / "two_ranks"


def test_directory_of_rank_traces_is_one_profile_with_every_rank() -> None:
    profiles = popprof.open_all(TWO_RANKS)
    assert list(profiles) == ["two_ranks"]
    p = profiles["two_ranks"]
    singles = [popprof.open(TWO_RANKS / f"rank-{r}.json.gz") for r in (0, 1)]
    ev = p.events
    assert len(ev) == sum(len(s.events) for s in singles)
    assert ev.groupby("rank").size().to_dict() == {0: len(singles[0].events), 1: len(singles[1].events)}
    assert ev["event_id"].is_unique and ev["event_id"].tolist() == list(range(len(ev)))
    # nesting survives the renumbering: every parent is an event of the same rank and thread
    child = ev[ev["parent_id"].notna()]
    parents = ev.set_index("event_id").loc[child["parent_id"].astype("int64")]
    assert (parents["rank"].to_numpy() == child["rank"].to_numpy()).all()
    assert (parents["tid"].to_numpy() == child["tid"].to_numpy()).all()
    assert set(p.threads["rank"]) == {0, 1}
    assert json.loads(p.meta["trace.ranks"]) == [0, 1]
    assert set(ev["device"].dropna().astype(str)) == {"gpu:0", "gpu:1"}


def test_rank_from_file_name_when_distributed_info_is_missing(tmp_path: Path) -> None:
    events = {
        "traceEvents": [
            {
                "ph": "X",
                "cat": "kernel",
                "name": "k",
                "pid": 0,
                "tid": 7,
                "ts": 10,
                "dur": 5,
                "args": {"stream": 7, "device": 0, "correlation": 1},
            }
        ]
    }
    for name in ("run.rank_3.json", "other.json"):
        (tmp_path / name).write_text(json.dumps(events))
    p = popprof.open(tmp_path)
    ranks = dict(
        zip(
            json.loads(p.meta["trace.rank_files"]).values(),
            json.loads(p.meta["trace.rank_files"]),
            strict=True,
        )
    )
    assert ranks == {"other.json": "0", "run.rank_3.json": "3"}  # no rank anywhere: its position
    assert "other.json" in p.meta["trace.rank_notes"]
    assert sorted(p.events["rank"].tolist()) == [0, 3]


def test_ranks_are_read_on_worker_processes_with_the_same_result(monkeypatch, tmp_path: Path) -> None:
    serial = popprof.open(TWO_RANKS)
    monkeypatch.setattr(rank_dir, "PARALLEL_MIN_BYTES", 0)
    calls = []
    real_pool = rank_dir._read_all

    def spy(files, options):
        calls.append(len(files))
        return real_pool(files, options)

    monkeypatch.setattr(rank_dir, "_read_all", spy)
    parallel = popprof.open(TWO_RANKS)
    assert calls == [2]
    pd.testing.assert_frame_equal(serial.events, parallel.events)


def test_summary_check_and_query_read_the_directory(capsys) -> None:
    assert main(["summary", str(TWO_RANKS)]) == 0
    text = capsys.readouterr().out
    assert "2 ranks (0, 1)" in text and "gpu:0" in text and "gpu:1" in text
    assert main(["check", str(TWO_RANKS), "--fail-on", "never"]) == 0
    capsys.readouterr()
    assert (
        main(
            [
                "query",
                str(TWO_RANKS),
                "SELECT rank, count(*) AS n FROM events GROUP BY 1 ORDER BY 1",
                "--format",
                "csv",
            ]
        )
        == 0
    )
    rows = capsys.readouterr().out.strip().splitlines()
    assert rows[0] == "rank,n" and [r.split(",")[0] for r in rows[1:]] == ["0", "1"]


@pytest.mark.parametrize("parallel_from", [1 << 40, 0])
def test_a_directory_with_a_corrupt_rank_file_names_the_file(
    monkeypatch, tmp_path: Path, capsys, parallel_from: int
) -> None:
    monkeypatch.setattr(rank_dir, "PARALLEL_MIN_BYTES", parallel_from)
    shutil.copy(TWO_RANKS / "rank-0.json.gz", tmp_path / "rank-0.json.gz")
    good = (TWO_RANKS / "rank-1.json.gz").read_bytes()
    (tmp_path / "rank-1.json.gz").write_bytes(good[:10] + b"\xff" * 200 + good[210:])
    before = (tmp_path / "rank-1.json.gz").read_bytes()
    code = main(["summary", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "rank-1.json.gz" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert (tmp_path / "rank-1.json.gz").read_bytes() == before


def test_a_truncated_rank_file_keeps_its_events_and_warns(tmp_path: Path, capsys) -> None:
    shutil.copy(TWO_RANKS / "rank-0.json.gz", tmp_path / "rank-0.json.gz")
    (tmp_path / "rank-1.json").write_text(
        '{"distributedInfo": {"rank": 1}, "traceEvents": ['
        '{"ph": "X", "name": "a", "ts": 1, "dur": 2, "pid": 1, "tid": 1},'
        '{"ph": "X", "name": "b", "ts": 4'
    )
    assert main(["summary", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "2 ranks (0, 1)" in captured.out and "truncated" in captured.err


def test_a_directory_with_no_trace_still_says_so(tmp_path: Path, capsys) -> None:
    (tmp_path / "notes.json").write_text('{"hello": 1}')
    assert main(["summary", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "holds no profile" in err and "Traceback" not in err


@pytest.mark.parametrize("name", ["rank-0.json.gz", "rank-1.json.gz"])
def test_single_rank_file_carries_its_rank_and_top_level_metadata(name: str) -> None:
    p = popprof.open(TWO_RANKS / name)
    rank = int(name[5])
    assert p.events["rank"].unique().tolist() == [rank]
    assert json.loads(p.meta["chrome.top.distributedInfo"])["rank"] == rank


def test_two_traces_of_one_rank_are_refused_in_one_line(tmp_path: Path, capsys) -> None:
    """HTA's ``tests/data/mixed_files``: traces of different runs side by side, each rank 0 (HTA keeps one
    and warns). Read as one run they would interleave on one device's timeline; popprof refuses them."""
    shutil.copy(TWO_RANKS / "rank-0.json.gz", tmp_path / "rank-0.json.gz")
    shutil.copy(REAL / "dlrm_8ranks" / "rank-0.json.gz", tmp_path / "dlrm_worker0.json.gz")
    with pytest.raises(popprof.InputError, match="more than one trace of one rank"):
        popprof.open(tmp_path)
    assert main(["summary", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "rank 0: dlrm_worker0.json.gz, rank-0.json.gz" in err


def test_a_file_without_a_rank_gets_a_free_rank_and_a_warning(tmp_path: Path, capsys) -> None:
    """HTA's ``distributed_info_unavailable`` trace (no ``distributedInfo``) beside a rank-0 trace: it is
    given rank 1 (its position, 0, is taken), and the CLI says so on stderr."""
    shutil.copy(REAL / "hta_a100_no_device_activity.json.gz", tmp_path / "a_no_rank.json.gz")
    shutil.copy(TWO_RANKS / "rank-0.json.gz", tmp_path / "rank-0.json.gz")
    p = popprof.open(tmp_path)
    assert json.loads(p.meta["trace.rank_files"]) == {"1": "a_no_rank.json.gz", "0": "rank-0.json.gz"}
    assert json.loads(p.meta["trace.rank_notes"]) == [
        "a_no_rank.json.gz: no rank in distributedInfo or the file name; given rank 1"
    ]
    assert main(["summary", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "2 ranks (0, 1)" in captured.out
    assert "1 file of the rank directory has no rank" in captured.err


def test_a_lone_file_without_a_rank_is_rank_0_and_one_thread_reads_so(tmp_path: Path, capsys) -> None:
    """HTA's ``rank_unavailable`` layout: one trace without a rank in a directory is rank 0, as HTA reads it."""
    shutil.copy(REAL / "hta_a100_no_device_activity.json.gz", tmp_path / "trace.json.gz")
    assert main(["summary", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "2,467 events on 1 thread, rank 0;" in captured.out
    assert "given the lowest rank no file has" in captured.err


def test_a_directory_of_runs_names_them_in_its_one_line(tmp_path: Path, capsys) -> None:
    """HTA's ``tests/data/trace_compare``: ``base/`` and ``test/``, one trace each, nothing directly inside."""
    for side, name in (
        ("base", "hta_trace_compare_base.json.gz"),
        ("test", "hta_trace_compare_test.json.gz"),
    ):
        (tmp_path / side).mkdir()
        shutil.copy(REAL / name, tmp_path / side / name)
    assert main(["summary", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert err.rstrip().endswith(
        "its subdirectories base, test hold traces: give one of them (each is a run)"
    )
    assert main(["diff", str(tmp_path / "base"), str(tmp_path / "test"), "--no-gate"]) == 0
    assert "3 added" in capsys.readouterr().out
