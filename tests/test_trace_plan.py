"""Issue 43 item 1: the Chrome reader's named plan (``readers/chrome/plan.py``): ``popprof.open(path,
parser=..., workers=...)``, recorded in the metadata, the same tables whatever the plan, and one error line
for a parser that cannot be used."""

from __future__ import annotations

import gzip
from pathlib import Path

import pandas as pd
import pytest
from real_inputs import NOT_CHROME

import popprof
from popprof.io import parallel
from popprof.model.errors import InputError, UsageError
from popprof.readers.chrome import plan as chrome_plan
from popprof.readers.chrome import split
from popprof.testing import trace_synth as synth

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "fixtures" / "real" / "traces"
#: every real Chrome trace (fixtures/real/traces/README.md gives where each comes from)
REAL_TRACES = sorted(
    p.relative_to(REAL).as_posix() for p in REAL.rglob("*.json.gz") if p.name not in NOT_CHROME
)
PLANS = [(parser, workers) for parser in chrome_plan.PARSERS for workers in chrome_plan.WORKERS]


def _meta(profile: popprof.Profile) -> dict[str, str]:
    return dict(profile.meta)


def _same_tables(a: popprof.Profile, b: popprof.Profile) -> None:
    """Every table holds the same values (a categorical's categories may come in another order: the order
    the parser met the names in), and the metadata is equal but for the keys that say how the file was read."""
    assert a.tables.keys() == b.tables.keys()
    for name in a.tables:
        left, right = a.tables[name], b.tables[name]
        if isinstance(left, pd.DataFrame) and name != "metadata":
            pd.testing.assert_frame_equal(left, right, check_exact=True, check_categorical=False, obj=name)
    how = set(chrome_plan.KEYS)
    assert {k: v for k, v in _meta(a).items() if k not in how} == {
        k: v for k, v in _meta(b).items() if k not in how
    }


@pytest.fixture(scope="module")
def plain_copies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each real trace uncompressed (a gzip file is read by one process: the split needs a plain file)."""
    out = tmp_path_factory.mktemp("plain")
    copies = {}
    for name in REAL_TRACES:
        target = out / name.replace("/", "__").removesuffix(".gz")
        target.write_bytes(gzip.decompress((REAL / name).read_bytes()))
        copies[name] = target
    return copies


@pytest.mark.parametrize("name", REAL_TRACES)
def test_every_parser_gives_the_same_tables_on_every_real_trace(name: str, plain_copies, monkeypatch) -> None:
    """arrow, orjson and ijson, on one process and on two, read each real trace into the same tables; the
    metadata names the plan that ran."""
    path = plain_copies[name]
    monkeypatch.setattr(split, "MIN_PIECE_BYTES", max(1, path.stat().st_size // 16))  # several pieces
    reads = {plan: popprof.open(path, parser=plan[0], workers=plan[1]) for plan in PLANS}
    first = reads[PLANS[0]]
    for (parser, workers), profile in reads.items():
        meta = _meta(profile)
        assert meta["chrome.parser"] == parser and meta["chrome.plan"].startswith("given")
        # two processes on every one (where there are two cores): the event array's end is found past
        # Kineto's INFO lines after it
        ran = workers if parallel.cores() >= 2 else 1
        assert meta["chrome.workers"] == str(ran), meta["chrome.plan"]
        assert (int(meta["chrome.parse_parts"]) > 1) is (ran == 2)
        _same_tables(profile, first)


@pytest.mark.skipif(parallel.cores() < 2, reason="one core (or POPPROF_PARALLEL=0): always one process")
def test_the_automatic_plan_is_recorded(tmp_path: Path, monkeypatch) -> None:
    """Without arguments: Arrow, two processes from PARALLEL_MIN_BYTES on, one for gzip (with the reason)."""
    plain = synth.write_chrome_trace(tmp_path / "t.json", 20, seed=1, args="kineto", layers=4)
    packed = synth.write_chrome_trace(tmp_path / "t.json.gz", 20, seed=1, args="kineto", layers=4)
    small = _meta(popprof.open(plain))
    assert (small["chrome.parser"], small["chrome.workers"], small["chrome.plan"]) == (
        "arrow",
        "1",
        "automatic",
    )
    monkeypatch.setattr(chrome_plan, "PARALLEL_MIN_BYTES", 0)
    large = _meta(popprof.open(plain))
    assert (large["chrome.parser"], large["chrome.workers"], large["chrome.plan"]) == (
        "arrow",
        "2",
        "automatic",
    )
    gz = _meta(popprof.open(packed))
    assert (gz["chrome.workers"], gz["chrome.plan"]) == (
        "1",
        "automatic; 1 process: a gzip file is read from its start",
    )
    with_args = _meta(popprof.open(plain, with_args=True))
    assert with_args["chrome.parser"] == "orjson" and "with_args" in with_args["chrome.plan"]


def test_a_stream_the_blocks_cannot_be_cut_from_goes_to_ijson_only_when_no_parser_was_named(
    tmp_path: Path,
) -> None:
    """A top-level array without its closing bracket, written so that no block boundary exists (one event
    per file): the automatic plan records its fall-back to ijson; a named block parser is one error line."""
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2}')
    auto = popprof.open(path)
    meta = _meta(auto)
    assert meta["chrome.parser"] == "ijson" and meta["chrome.plan"].startswith("automatic; ijson: ")
    assert len(auto.events) == 1
    for parser in ("arrow", "orjson"):
        with pytest.raises(InputError, match=f"parser '{parser}' cannot read this file .*parser='ijson' can"):
            popprof.open(path, parser=parser)
    assert len(popprof.open(path, parser="ijson").events) == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"parser": "simdjson"}, "parser 'simdjson' is not one of arrow, orjson, ijson"),
        ({"parser": "arrow", "with_args": True}, "parser 'arrow' does not keep args"),
        ({"workers": 3}, "workers=3: a Chrome trace is read by 1 or 2 processes"),
    ],
)
def test_a_plan_that_cannot_run_is_one_line(tmp_path: Path, kwargs: dict, message: str) -> None:
    path = synth.write_chrome_trace(tmp_path / "t.json", 2, seed=1)
    with pytest.raises((UsageError, InputError)) as caught:
        popprof.open(path, **kwargs)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_parser_that_is_not_installed_is_one_line(tmp_path: Path, monkeypatch) -> None:
    path = synth.write_chrome_trace(tmp_path / "t.json", 2, seed=1)
    monkeypatch.setattr(chrome_plan, "available", lambda parser: parser != "ijson")
    with pytest.raises(UsageError, match="^parser 'ijson' needs the ijson package, which is not installed$"):
        popprof.open(path, parser="ijson")
    assert _meta(popprof.open(path))["chrome.parser"] == "arrow"  # not named: the others still read it
