"""One device map everywhere: ``--device-map`` on every command that reads traces, ``[tool.popprof.device_map]``
honoured by all of them, and the same from Python (also for a bundle of a trace)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import popprof
from popprof.cli import main

#: begin_end.json maps MatMul, NCCL and Memcpy to the device by default (3 of each, 9 device events of 19);
#: this map also makes the three TraceMe train_step events device compute.
ADD = {"compute": "^TraceMe:train_step"}
#: and this one switches every default off: no device activity at all.
NONE = dict.fromkeys(("compute", "exchange", "host_io", "sync", "other"), "")
DEVICE_SQL = "SELECT count(*) AS n FROM events WHERE device_category IS NOT NULL"


@pytest.fixture
def trace(fixtures_dir: Path) -> Path:
    return fixtures_dir / "traces" / "begin_end.json"


def _query_count(capsys, *args: str) -> int:
    capsys.readouterr()
    assert main(["query", *args, DEVICE_SQL, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)[0]["n"]


def test_query_honours_the_option_and_the_config(trace: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert _query_count(capsys, str(trace)) == 9
    assert _query_count(capsys, str(trace), "--device-map", json.dumps(ADD)) == 12
    assert _query_count(capsys, str(trace), "--device-map", json.dumps(NONE)) == 0
    (tmp_path / "pyproject.toml").write_text('[tool.popprof.device_map]\ncompute = "^TraceMe:train_step"\n')
    assert _query_count(capsys, str(trace)) == 12
    # the option wins over the config
    assert _query_count(capsys, str(trace), "--device-map", json.dumps(NONE)) == 0
    # a file holding the map works too
    (tmp_path / "map.json").write_text(json.dumps(NONE))
    assert _query_count(capsys, str(trace), "--device-map", str(tmp_path / "map.json")) == 0


def _baseline_busy(capsys, *args: str) -> float | None:
    capsys.readouterr()
    assert main(["baseline", *args]) == 0
    return json.loads(capsys.readouterr().out)["metrics"].get("trace.device_busy_us", {}).get("value")


def test_baseline_summary_and_check_read_the_same_map(
    trace: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    default = _baseline_busy(capsys, str(trace))
    added = _baseline_busy(capsys, str(trace), "--device-map", json.dumps(ADD))
    assert added > default  # train_step time joins the device busy time

    capsys.readouterr()
    assert main(["summary", str(trace), "--format", "json"]) == 0
    plain = capsys.readouterr().out
    assert main(["summary", str(trace), "--format", "json", "--device-map", json.dumps(NONE)]) == 0
    assert capsys.readouterr().out != plain

    assert (
        main(
            [
                "check",
                str(trace),
                "--rule",
                "host.device-gaps",
                "--format",
                "json",
                "--device-map",
                json.dumps(NONE),
            ]
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)["profiles"][0]
    assert [r["rule_id"] for r in result["not_evaluated"]] == ["host.device-gaps"]
    assert "device activity" in result["not_evaluated"][0]["reason"]
    (tmp_path / "popprof.toml").write_text("[device_map]\n" + "\n".join(f'{k} = ""' for k in NONE) + "\n")
    assert main(["check", str(trace), "--rule", "host.device-gaps", "--format", "json"]) == 0
    assert (
        json.loads(capsys.readouterr().out)["profiles"][0]["not_evaluated"][0]["rule_id"]
        == "host.device-gaps"
    )
    assert default and _baseline_busy(capsys, str(trace)) is None  # no device activity: no busy figure


def test_export_keeps_the_map_and_a_bundle_is_reclassified(trace: Path, tmp_path: Path, capsys) -> None:
    bundle = tmp_path / "b.popprof"
    assert main(["export", str(trace), "-o", str(bundle), "--device-map", json.dumps(ADD)]) == 0
    assert popprof.open(bundle).events["device_category"].notna().sum() == 12
    # a bundle read with another map is classified as its source trace would be
    assert _query_count(capsys, str(bundle), "--device-map", json.dumps(NONE)) == 0
    reread = popprof.open(bundle, device_map={"compute": None})
    direct = popprof.open(trace, device_map={"compute": None})
    assert (
        reread.events["device_category"].astype(object).tolist()
        == direct.events["device_category"].astype(object).tolist()
    )


def test_diff_timeline_plot_report_accept_the_map(trace: Path, tmp_path: Path, capsys) -> None:
    mapping = json.dumps(ADD)
    assert (
        main(
            [
                "diff",
                str(trace),
                str(trace),
                "--format",
                "json",
                "--all",
                "--no-gate",
                "--device-map",
                mapping,
            ]
        )
        == 0
    )
    metrics = json.loads(capsys.readouterr().out)
    text = json.dumps(metrics)
    assert "trace.device_busy_us" in text
    out = tmp_path / "t.json"
    assert main(["timeline", str(trace), "-o", str(out), "--device-map", mapping]) == 0
    marked = [
        e
        for e in json.loads(out.read_text())["traceEvents"]
        if e.get("args", {}).get("device_category") == "compute"
    ]
    assert len(marked) == 6  # 3 MatMul + 3 train_step
    assert main(["tables", str(trace), "--device-map", mapping]) == 0
    pytest.importorskip("matplotlib")
    assert (
        main(
            ["plot", str(trace), "--kind", "timeline", "-o", str(tmp_path / "t.png"), "--device-map", mapping]
        )
        == 0
    )
    assert (
        main(["report", str(trace), "-o", str(tmp_path / "r.html"), "--no-plots", "--device-map", mapping])
        == 0
    )


@pytest.mark.parametrize(
    "command",
    ["summary", "tables", "query", "check", "baseline", "export", "timeline", "plot", "report", "diff"],
)
def test_every_trace_command_rejects_a_bad_map_before_reading(
    command: str, trace: Path, tmp_path: Path, capsys
) -> None:
    args = {
        "query": [str(trace), "SELECT 1"],
        "diff": [str(trace), str(trace)],
        "export": [str(trace), "-o", str(tmp_path / "x.popprof")],
        "timeline": [str(trace), "-o", str(tmp_path / "x.json")],
        "plot": [str(trace), "--kind", "timeline", "-o", str(tmp_path / "x.png")],
        "report": [str(trace), "-o", str(tmp_path / "x.html")],
    }.get(command, [str(trace)])
    assert main([command, *args, "--device-map", '{"gpu": "x"}']) == 2
    err = capsys.readouterr().err
    assert "unknown category 'gpu'" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_python_open_takes_the_map_or_the_config(trace: Path) -> None:
    assert popprof.open(trace).events["device_category"].notna().sum() == 9
    assert popprof.open(trace, device_map=ADD).events["device_category"].notna().sum() == 12
    assert popprof.open(trace, config={"device_map": ADD}).events["device_category"].notna().sum() == 12
    # an explicit map wins over the config's, as on the command line
    assert (
        popprof.open(trace, device_map=NONE, config={"device_map": ADD})
        .events["device_category"]
        .notna()
        .sum()
        == 0
    )


def test_the_project_config_is_one_call_away(trace: Path, tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "popprof.toml").write_text('[device_map]\ncompute = "^TraceMe:train_step"\n')
    monkeypatch.chdir(tmp_path)
    profile = popprof.open(trace, config=popprof.config.load_config())
    assert profile.events["device_category"].notna().sum() == 12


def test_record_opens_traces_under_the_same_map(trace: Path) -> None:
    from popprof.record.collect import Collected, open_files

    plain, mapped = Collected(), Collected()
    open_files([("t", trace)], plain, sdk=True)
    open_files([("t", trace)], mapped, sdk=True, device_map=NONE)
    assert plain.profiles["t"].events["device_category"].notna().sum() == 9
    assert mapped.profiles["t"].events["device_category"].notna().sum() == 0


def test_record_takes_the_option(capsys) -> None:
    assert main(["record", "--device-map", '{"gpu": "x"}', "--", "true"]) == 2
    assert "unknown category 'gpu'" in capsys.readouterr().err
