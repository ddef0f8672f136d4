"""Finding and reading the popprof configuration."""

from __future__ import annotations

import pytest

from popprof.io.config import find_config, load_config
from popprof.model.errors import InputError


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_no_config_gives_empty_dict(tmp_path):
    assert find_config(tmp_path) is None and load_config(start=tmp_path) == {}
    write(tmp_path / "popprof.toml", "")
    assert load_config(start=tmp_path) == {}


def test_pyproject_tool_popprof_found_walking_up(tmp_path):
    write(
        tmp_path / "pyproject.toml",
        '[tool.popprof.rules]\n"memory.headroom.warning" = 0.8\n'
        '[tool.popprof.gate]\n"memory.max_tile_incl_gaps_bytes" = "+1%"\n',
    )
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    config = load_config(start=deep)
    assert config["rules"] == {"memory.headroom.warning": 0.8}
    assert config["gate"] == {"memory.max_tile_incl_gaps_bytes": "+1%"}
    assert find_config(deep) == tmp_path / "pyproject.toml"


def test_pyproject_without_tool_popprof_is_skipped(tmp_path):
    write(tmp_path / "popprof.toml", "[rules]\nenable = ['memory.*']\n")
    write(tmp_path / "inner" / "pyproject.toml", "[project]\nname = 'other'\n[tool.ruff]\nline-length = 99\n")
    assert load_config(start=tmp_path / "inner") == {"rules": {"enable": ["memory.*"]}}


def test_pyproject_whose_tool_is_not_a_table_is_skipped(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.popprof.rules]\n"memory.headroom.warning" = 0.8\n')
    odd = write(tmp_path / "sub" / "pyproject.toml", "tool = 1\n")
    assert find_config(odd.parent) == tmp_path / "pyproject.toml"
    assert load_config(start=odd.parent)["rules"] == {"memory.headroom.warning": 0.8}
    assert load_config(explicit=odd) == {}


def test_nearest_wins_and_popprof_toml_beats_pyproject_in_one_directory(tmp_path):
    write(tmp_path / "popprof.toml", "[rules]\nfail_on = 'error'\n")
    inner = tmp_path / "inner"
    write(inner / "pyproject.toml", "[tool.popprof.rules]\nfail_on = 'warning'\n")
    assert load_config(start=inner)["rules"]["fail_on"] == "warning"
    write(inner / "popprof.toml", "[rules]\nfail_on = 'never'\n")
    assert load_config(start=inner)["rules"]["fail_on"] == "never"


def test_cwd_is_the_default_start(tmp_path, monkeypatch):
    write(tmp_path / "popprof.toml", "[redact]\nkeep = ['engine_options']\n")
    monkeypatch.chdir(tmp_path)
    assert load_config() == {"redact": {"keep": ["engine_options"]}}


def test_explicit_file(tmp_path):
    pyproject = write(tmp_path / "x" / "pyproject.toml", "[tool.popprof.rules]\ndisable = ['host.*']\n")
    assert load_config(explicit=pyproject) == {"rules": {"disable": ["host.*"]}}
    other = write(tmp_path / "ci.toml", "[rules]\nenable = ['memory.tile-oom']\n")
    assert load_config(start=tmp_path / "x", explicit=other) == {"rules": {"enable": ["memory.tile-oom"]}}
    plain = write(tmp_path / "y" / "pyproject.toml", "[project]\nname = 'z'\n")
    assert load_config(explicit=plain) == {}


def test_missing_and_invalid_files_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="config file not found"):
        load_config(explicit=tmp_path / "nope.toml")
    bad = write(tmp_path / "popprof.toml", "[rules\n")
    with pytest.raises(InputError, match="invalid TOML") as info:
        load_config(start=tmp_path)
    assert info.value.path == str(bad)
    write(tmp_path / "p" / "pyproject.toml", "[tool]\npopprof = 3\n")
    with pytest.raises(InputError, match=r"\[tool.popprof\] must be a table"):
        load_config(explicit=tmp_path / "p" / "pyproject.toml")
