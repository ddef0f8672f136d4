"""popprof record's environment: popprof's keys merged into the user's, the user's keys win, bad JSON refused."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from popprof.model.errors import UsageError
from popprof.record.env import ProfilingChoice, build_environment, engine_options, parse_user_value
from popprof.record.run import forward_rule


def test_all_on_sets_the_documented_keys(tmp_path: Path) -> None:
    env = build_environment({}, ProfilingChoice(), tmp_path / "out", cwd=tmp_path)
    engine = json.loads(env.variables["POPLAR_ENGINE_OPTIONS"])
    pvti = json.loads(env.variables["PVTI_OPTIONS"])
    reports = str(tmp_path / "out" / "reports")
    assert engine == {"autoReport.all": "true", "autoReport.directory": reports}
    assert pvti == {"enable": "true", "directory": reports}
    assert env.report_dir == env.trace_dir == Path(reports)


def test_users_keys_win_and_their_other_keys_are_kept(tmp_path: Path) -> None:
    user = {
        "POPLAR_ENGINE_OPTIONS": json.dumps(
            {
                "autoReport.directory": "mine",
                "debug.allowOutOfMemory": "true",
                "autoReport.executionProfileProgramRunCount": "5",
            }
        ),
        "PVTI_OPTIONS": '{"enable": "true", "channels": ["Poplar"]}',
        "OTHER": "kept",
    }
    env = build_environment(user, ProfilingChoice(run_count=3), tmp_path / "out", cwd=tmp_path)
    engine = json.loads(env.variables["POPLAR_ENGINE_OPTIONS"])
    assert engine == {
        "autoReport.all": "true",
        "autoReport.directory": "mine",
        "debug.allowOutOfMemory": "true",
        "autoReport.executionProfileProgramRunCount": "5",
    }
    assert env.report_dir == tmp_path / "mine"  # relative to CMD's working directory, as Poplar resolves it
    pvti = json.loads(env.variables["PVTI_OPTIONS"])
    assert pvti == {"enable": "true", "directory": str(tmp_path / "out" / "reports"), "channels": ["Poplar"]}
    assert env.user_keys["POPLAR_ENGINE_OPTIONS"] == [
        "autoReport.directory",
        "autoReport.executionProfileProgramRunCount",
    ]
    merged = env.apply(user)
    assert merged["OTHER"] == "kept" and set(merged) == set(user)


@pytest.mark.parametrize(
    ("graph", "execution", "expected"),
    [
        (True, False, {"autoReport.all": "true", "autoReport.outputExecutionProfile": "false"}),
        (
            False,
            True,
            {
                "autoReport.all": "true",
                "autoReport.outputGraphProfile": "false",
                "autoReport.executionProfileProgramRunCount": "1",
            },
        ),
        (False, False, {}),
    ],
)
def test_parts_switched_off(tmp_path: Path, graph: bool, execution: bool, expected: dict) -> None:
    options = engine_options(ProfilingChoice(graph=graph, execution=execution, run_count=1), tmp_path)
    options.pop("autoReport.directory", None)
    assert options == expected


def test_nothing_asked_leaves_the_variables_alone(tmp_path: Path) -> None:
    user = {"POPLAR_ENGINE_OPTIONS": '{"target.hostSyncTimeout": "30"}'}
    env = build_environment(user, ProfilingChoice(graph=False, execution=False, trace=False), tmp_path)
    assert env.variables == {} and env.report_dir is None and env.trace_dir is None
    assert env.apply(user) == user


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ('{"autoReport.all": "true",', "is not valid JSON"),
        ("autoReport.all=true", "is not valid JSON"),
        ('["autoReport.all"]', "must be a JSON object"),
        ('"true"', "must be a JSON object"),
    ],
)
def test_invalid_user_value_is_one_usage_error(value: str, problem: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_user_value("POPLAR_ENGINE_OPTIONS", value)
    message = str(info.value)
    assert message.startswith(f"$POPLAR_ENGINE_OPTIONS {problem}") and "\n" not in message


def test_blank_user_value_counts_as_unset() -> None:
    assert parse_user_value("PVTI_OPTIONS", "  ") == {} and parse_user_value("PVTI_OPTIONS", None) == {}


def test_forward_rule() -> None:
    assert forward_rule(signal.SIGTERM, same_terminal_group=True)
    assert forward_rule(signal.SIGTERM, same_terminal_group=False)
    assert forward_rule(signal.SIGINT, same_terminal_group=False)
    assert not forward_rule(
        signal.SIGINT, same_terminal_group=True
    )  # the terminal's Ctrl-C already reached CMD
