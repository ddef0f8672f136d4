"""popprof.io.units: the one way each quantity prints and parses (values worked out by hand)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from popprof.io import units

PACKAGE = Path(__file__).resolve().parents[1] / "popprof"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0 B"),
        (650, "650 B"),
        (1023, "1,023 B"),
        (1024, "1,024 B (1 KiB)"),
        (638_976, "638,976 B (624 KiB)"),
        (23_878_396, "23,878,396 B (22.8 MiB)"),  # 23878396 / 2**20 = 22.77
        (2_073_274_576, "2,073,274,576 B (1.9 GiB)"),
        (1_048_575, "1,048,575 B (1 MiB)"),
        (
            1_000_000,
            "1,000,000 B (976.6 KiB)",
        ),  # not "1 MiB": 0.95 MiB  # 1023.999 KiB rounds up into the next unit
        (23_878_396.0, "23,878,396 B (22.8 MiB)"),
        (None, "n/a"),
        (float("nan"), "n/a"),
        (pd.NA, "n/a"),
    ],
)
def test_bytes_print_one_way(value: object, text: str) -> None:
    assert units.nbytes(value) == text


def test_bytes_signed_and_short() -> None:
    assert units.nbytes(1536, signed=True) == "+1,536 B (+1.5 KiB)"
    assert units.nbytes(-1536, signed=True) == "-1,536 B (-1.5 KiB)"
    assert units.nbytes(-1536) == "-1,536 B (-1.5 KiB)"
    assert units.bytes_short(512 << 20) == "512 MiB"
    assert units.bytes_short(100) == "100 B"
    assert units.nbytes(None, missing="—") == "—"


@pytest.mark.parametrize(
    ("us", "text"),
    [
        (0.0, "0.0 us"),
        (850.0, "850.0 us"),
        (999.96, "1.00 ms"),  # rounds to 1000.0 us: shown in the next unit
        (12_345.0, "12.35 ms"),
        (13_375.036, "13.38 ms"),
        (3_367_344.0, "3.367 s"),
        (None, "n/a"),
        (np.nan, "n/a"),
    ],
)
def test_durations_one_rule(us: object, text: str) -> None:
    assert units.duration(us) == text


def test_offsets_are_signed_durations() -> None:
    assert units.offset(32_800.0) == "+32.80 ms"
    assert units.offset(-40.0) == "-40.0 us"
    assert units.offset(0.0) == "+0.0 us"


def test_shares_percentages_and_limits() -> None:
    assert units.percent(0.243) == "24.3 %"
    assert units.percent(1.0) == "100.0 %"
    assert units.percent(None, missing="-") == "-"
    assert units.relative(0.025) == "+2.50 %"
    assert units.relative(-1.0) == "-100.00 %"
    assert units.relative(math.inf) == "new"
    assert units.relative(None) == ""
    assert units.limit_percent(0.95) == "95 %"
    assert units.limit_percent(0.029) == "2.9 %"  # no binary noise
    assert units.limit_percent(0.025) == "2.5 %"
    assert units.limit_percent(1) == "100 %"


def test_ratios_counts_and_metric_values() -> None:
    assert units.ratio(0.243) == "0.2430"
    assert units.count(3_006_485.0) == "3,006,485"
    assert units.count(12, signed=True) == "+12"
    assert units.value(3_006_485.0, "cycles") == "3,006,485"  # never 3.006485e+06
    assert units.value(0.5, "ratio") == "0.5000"
    assert units.value(12_345.0, "us") == "12.35 ms"
    assert units.value(2048, "bytes") == "2,048 B (2 KiB)"
    assert units.value(68.6, "%") == "68.6 %"
    assert units.value(0.959, "share") == "95.9 %"
    assert units.value(1234.5, "samples/s") == "1,234.50 samples/s"
    assert units.value(0.6857, "") == "0.686"
    assert units.change(-2048, "bytes") == "-2,048 B (-2 KiB)"
    assert units.change(None, "bytes") == ""
    assert units.amount(256, "levels") == "256 levels"
    assert units.amount(200, "ratio") == "200:1"


@pytest.mark.parametrize(
    ("gbps", "text"),
    [(25.489764, "25.5 GB/s"), (1.5436647, "1.54 GB/s"), (1234.56, "1,234.6 GB/s"), (300, "300.0 GB/s")],
)
def test_bandwidths_print_one_way(gbps: float, text: str) -> None:
    assert units.bandwidth(gbps) == text


def test_bandwidth_missing_and_rates() -> None:
    assert units.bandwidth(None) == "n/a"
    assert units.bandwidth(float("nan"), missing="-") == "-"
    assert units.bandwidth(float("inf")) == "n/a"  # no transfer time: no bandwidth, never "inf GB/s"
    assert units.rate(312.0, "TFLOP/s") == "312.0 TFLOP/s"
    assert units.rate(0.0123, "TB/s") == "0.0123 TB/s"


@pytest.mark.parametrize(
    ("text", "value"),
    [("512M", 512 << 20), ("1.5GiB", 3 << 29), ("4096", 4096), ("64 KiB", 64 << 10), ("2g", 2 << 30)],
)
def test_parse_bytes(text: str, value: int) -> None:
    assert units.parse_bytes(text) == value


@pytest.mark.parametrize("text", ["", "lots", "5 parsecs", "-1M"])
def test_parse_bytes_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a size"):
        units.parse_bytes(text)


def test_parse_share() -> None:
    assert units.parse_share("1%") == 0.01
    assert units.parse_share("2.9 %") == 0.029
    assert units.parse_share(0.85) == 0.85
    assert units.parse_share("0.85") == 0.85
    with pytest.raises(ValueError):
        units.parse_share("most")
    with pytest.raises(ValueError):
        units.parse_share(True)
    assert units.parse_count("256") == 256
    with pytest.raises(ValueError):
        units.parse_count("256M")


#: Names of the formatters units.py replaced; none may come back anywhere in the package.
OLD_FORMATTERS = (
    r"def _b\(",
    r"def _n\(",
    r"def _pct\(",
    r"def _fmt\(",
    r"def _fmt_value\(",
    r"def _num_text\(",
    r"def fmt_time\(",
    r"def fmt_value\(",
    r"def fmt_change\(",
    r"def fmt_rel\(",
    r"def format_bytes\(",
    r"def human\(",
    r"def threshold_pct\(",
    r"def nbytes\(",
    r"def duration\(",
    r"_SIZE = re\.compile",
)


def test_one_formatter_of_each_kind() -> None:
    """Only popprof/io/units.py formats bytes, durations and shares (popprof/testing writes
    fixtures, not text for people)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "units.py" or "testing" in path.parts:
            continue
        text = path.read_text()
        found += [
            f"{path.relative_to(PACKAGE)}: {pattern}"
            for pattern in OLD_FORMATTERS
            if re.search(pattern, text)
        ]
        # a byte count spelled out by hand instead of units.nbytes
        found += [f"{path.relative_to(PACKAGE)}: bytes by hand" for _ in re.finditer(r",\.0f\} B\b", text)]
    assert not found, found
    assert not (PACKAGE / "rules" / "fmt.py").exists() and not (PACKAGE / "compare" / "fmt.py").exists()


def test_no_package_line_over_200_characters() -> None:
    long = [
        f"{path.relative_to(PACKAGE)}:{n}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if len(line) > 200
    ]
    assert not long, long


def test_a_small_change_that_is_there_never_prints_as_zero():
    """HTA's trace_compare pair: device idle share changed by 0.003 points, which two decimals printed as
    "+0.00 pp ... worse"; a change prints to its first digit (up to six decimals), a zero one as zero."""
    assert units.change(0.00003, "share") == "+0.003 pp"
    assert units.change(-0.00004, "share") == "-0.004 pp"
    assert units.change(0.0052, "share") == "+0.52 pp"
    assert units.change(0.0, "share") == "+0.00 pp"
    assert units.change(1e-12, "share") == "+0.00 pp"  # below a millionth of a point: float noise
    assert units.relative(0.00003) == "+0.003 %"
    assert units.relative(0.025) == "+2.50 %"
    assert units.relative(float("inf")) == "new"
    assert units.change(None, "share") == units.relative(None) == ""
