"""Every kind of shipped fixture redacts with a passing leak scan and gives the same metrics and findings."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import popprof
from popprof.metrics import compute
from popprof.redaction import redact

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CASES = [
    "traces/training_loop.json",
    "traces/training_loop.json.gz",
    "traces/begin_end.json",
    "mk2_oom.popprof",
    "text_summary/mk2_oom.txt",
    "sdk1_json/mk2_training.json",
]


@pytest.mark.parametrize("name", CASES)
def test_fixture_redacts_with_same_numbers(name, tmp_path):
    src = FIXTURES / name
    if not src.exists():
        pytest.skip(f"fixture {name} not generated")
    out = tmp_path / (
        src.name
        if src.is_file() and src.suffix in (".json", ".gz", ".txt") and "sdk1" not in name
        else "out.popprof"
    )
    report = redact(src, out, key=b"fixture-key-0123")
    assert report.passed, report.scan
    a, b = popprof.open(src), popprof.open(out)
    assert compute(a) == compute(b)
    cols = ["rule_id", "severity", "value", "threshold"]
    pd.testing.assert_frame_equal(popprof.check(a).frame[cols], popprof.check(b).frame[cols])
