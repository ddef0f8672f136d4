"""The configuration is a typed :class:`popprof.io.config.Config` (issue 43, item 4), validated when loaded,
that still reads as the mapping it replaces."""

from __future__ import annotations

from pathlib import Path

import pytest

import popprof
from popprof.cli.check import _fail_on
from popprof.compare.gate import load_budget
from popprof.io.config import EMPTY, Config, load_config
from popprof.model.errors import InputError, UsageError
from popprof.pilot.diagnose import thresholds_from
from popprof.rules.base import plan
from popprof.store.trend_config import TrendSettings

TOML = """
[tool.popprof.rules]
fail_on = "warning"
disable = ["host.*"]
"memory.headroom.warning" = 0.8

[tool.popprof.gate]
"memory.max_tile_incl_gaps_bytes" = "+1%"

[tool.popprof.device_map]
host_io = ""  # no copy counts as host I/O

[tool.popprof.pilot]
does_not_fit_utilisation = 0.9

[tool.popprof.trend]
exact = "memory.*"

[tool.popprof.other]
kept = true
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(TOML)
    return tmp_path


def test_a_loaded_config_has_typed_fields_and_its_file(project):
    config = load_config(start=project)
    assert isinstance(config, Config) and config.path == project / "pyproject.toml"
    assert config.rules["disable"] == ["host.*"] and config.fail_on == "warning"
    assert config.gate == {"memory.max_tile_incl_gaps_bytes": "+1%"}
    assert config.device_map == {"host_io": ""}
    assert config.pilot == {"does_not_fit_utilisation": 0.9} and config.redact == {}
    assert config.trend == {"exact": "memory.*"}
    assert config["other"] == {"kept": True}  # unknown keys stay readable, as in the mapping it replaces
    assert config.get("rules") is config.rules and "gate" in config and len(config) == 6


def test_no_config_is_the_empty_one(tmp_path):
    config = load_config(start=tmp_path)
    assert config is EMPTY and config == {} and not config
    assert config.rules == {} and config.device_map is None and config.fail_on is None


def test_a_mapping_from_python_is_wrapped_as_it_is():
    table = {"rules": {"enable": "memory"}, "device_map": ""}
    config = Config.of(table)
    assert config.rules == {"enable": "memory"} and config.device_map is None and config.path is None
    assert Config.of(config) is config and Config.of(None) is EMPTY and Config.of({}) is EMPTY
    assert config == table  # compares as the mapping


def test_consumers_read_the_typed_fields(project):
    config = load_config(start=project)
    assert _fail_on(None, config) == "warning" and _fail_on(None, EMPTY) == "error"
    assert _fail_on("info", config) == "info"
    selected, _ = plan(config=config)
    assert selected and not any(rule.id.startswith("host.") for rule in selected)
    assert plan(config=dict(config))[0] == selected  # a plain dict gives the same plan
    assert load_budget(config=config).source == "[tool.popprof.gate]"
    assert thresholds_from(config)["does_not_fit_utilisation"] == 0.9
    assert TrendSettings.from_config(config).mode_for("memory.total", "auto") == "exact"


def test_a_bad_table_from_python_is_still_refused_by_its_consumer():
    with pytest.raises(UsageError, match="must be a table"):
        plan(config={"rules": "memory"})


def test_a_wrong_type_in_a_file_is_refused_when_loaded(tmp_path):
    bad = tmp_path / "popprof.toml"
    bad.write_text("[rules]\nenable = [1]\n")
    with pytest.raises(InputError, match=r"rules.enable\[0\]"):
        load_config(explicit=bad)


def test_the_api_takes_a_config(project):
    trace = (
        Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces" / "amd_mi250_minitoy.json.gz"
    )
    config = load_config(start=project)
    typed = popprof.open(trace, config=config).events
    assert typed.equals(popprof.open(trace, config=dict(config)).events)
    assert (popprof.open(trace).events["device_category"] == "host_io").any()  # its Memcpy kernels by default
    assert (typed["device_category"] == "host_io").sum() == 0  # the config's map was applied
