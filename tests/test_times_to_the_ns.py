"""Times print to the nanosecond everywhere (docs/figures.md, "Times to the nanosecond"): a real H100 trace
whose clock runs near 1.42e12 us, where end - start carries float noise below the trace's 1 ns resolution."""

from __future__ import annotations

import gzip
import json
import math
import re
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from popprof.cli import cli
from popprof.io import jsonout, units

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
BERT = REAL / "tracelens_h100_bert_small.json.gz"


def _run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output[-2000:]
    return result.stdout


def _times(document: object, key: str = ""):
    """Every (key, float) under a key naming microseconds, at any depth."""
    if isinstance(document, dict):
        for k, v in document.items():
            yield from _times(v, k)
    elif isinstance(document, list):
        for v in document:
            yield from _times(v, key)
    elif isinstance(document, float) and key.endswith("_us"):
        yield key, document


def _decimals(value: float) -> int:
    text = repr(value)
    return len(text.split(".")[1]) if "." in text and "e" not in text else 0


def test_the_trace_clock_makes_noise_that_json_leaves_out() -> None:
    doc = json.loads(_run("summary", str(BERT), "--format", "json", "-q"))
    times = list(_times(doc))
    assert len(times) > 100
    assert all(_decimals(v) <= 3 for _, v in times), [t for t in times if _decimals(t[1]) > 3][:5]
    # the top kernel's total, from the file's own durations (3 decimals, ns): the sum, to the ns
    trace = orjson.loads(gzip.decompress(BERT.read_bytes()))
    top = doc["trace"]["top_kernels"][0]
    raw = [
        e["dur"]
        for e in trace["traceEvents"]
        if e.get("cat") == "kernel" and e["name"].startswith(top["name"])
    ]
    assert len(raw) == top["count"] == 17
    assert top["total_us"] == round(math.fsum(raw), 3) == 98.718
    # the time account's parts and a gain's value and whole are times too
    assert all(_decimals(v) <= 3 for account in doc["time_account"] for v in account["parts"].values())
    gain = doc["what_limits"]["opportunities"][0]["estimated_gain"]
    assert gain["unit"] == "us" and _decimals(gain["value"]) <= 3 and _decimals(gain["whole"]) <= 3


def test_in_memory_documents_keep_the_float_and_shares_are_not_times() -> None:
    noisy = {"total_us": 98.718017578125, "share": 0.813714170617834, "parts": {"compute": 307.19775390625}}
    assert jsonout.plain(noisy) == noisy
    written = json.loads(jsonout.dumps(noisy))
    assert written == {"total_us": 98.718, "share": 0.813714170617834, "parts": {"compute": 307.198}}
    row = {"name": "x", "unit": "bytes", "value": 3.0, "base": 2.5}
    assert json.loads(jsonout.dumps(row)) == {"name": "x", "unit": "bytes", "value": 3, "base": 2.5}


def test_csv_and_text_print_the_time_json_prints() -> None:
    csv = _run("summary", str(BERT), "--format", "csv", "-q").splitlines()
    header, row = csv[0].split(","), csv[1].split(",")
    span = row[header.index("span_us")]
    assert span == "3907.825"
    assert all(len(row[i].split(".")[-1]) <= 3 for i, c in enumerate(header) if c.endswith("_us") and row[i])
    # text rounds to the ns first, then to its digits: the float noise's 113.94999999999993 is 113.95
    assert units.duration(113.94999999999993) == units.duration(113.95) == "114.0 us"
    assert units.duration(-1e-5, signed=True) == "+0.0 us"
    assert units.duration(float("nan")) == units.MISSING


def test_a_profile_against_its_own_baseline_changes_nothing_and_passes_a_zero_budget(tmp_path: Path) -> None:
    baseline = tmp_path / "base.json"
    _run("baseline", str(BERT), "-o", str(baseline), "-q")
    stored = json.loads(baseline.read_text())
    values = [
        v["value"] for k, v in stored["metrics"].items() if k.endswith("_us") and v.get("value") is not None
    ]
    assert values and all(_decimals(v) <= 3 for v in values)
    budget = tmp_path / "budget.toml"
    budget.write_text('defaults = false\n[budgets]\n"account.*" = "+0"\n"trace.*" = "+0"\n')
    result = CliRunner().invoke(cli, ["diff", str(baseline), str(BERT), "--budget", str(budget), "-q"])
    assert result.exit_code == 0, result.output[-2000:]
    assert "no metric changed" in result.stdout
    doc = json.loads(
        _run("diff", str(baseline), str(BERT), "--format", "json", "--budget", str(budget), "--no-gate", "-q")
    )
    assert {m["status"] for m in doc["metrics"]} <= {"unchanged", "missing_base", "missing_new"}


@pytest.mark.parametrize("value", [98.718017578125, 3907.824951171875, 21837.607000000004])
def test_rounding_is_to_the_nanosecond_only(value: float) -> None:
    assert re.fullmatch(r"\d+\.\d{1,3}", repr(json.loads(jsonout.dumps({"x_us": value}))["x_us"]))
    assert abs(json.loads(jsonout.dumps({"x_us": value}))["x_us"] - value) <= 5e-4
