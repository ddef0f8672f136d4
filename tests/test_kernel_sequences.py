"""Frequent kernel sequences (popprof/metrics/kernel_sequences.py) on the real traces, against HolisticTraceAnalysis
0.5.0's ``get_frequent_cuda_kernel_sequences``.

``fixtures/real/traces/hta_kernel_sequences_reference.json`` (written by ``make_hta_kernel_sequences.py`` there,
HTA 0.5.0 under pandas 2.3.3 in its own virtualenv) holds, per case (run, rank, operator, minimum length), HTA's
rows in HTA's order: the pattern text's SHA-256 (and length, head), its kernel count, ``count``, GPU and CPU
durations. popprof's rows must be the same, in the same order.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

import popprof
from popprof.metrics.kernel_sequences import COLUMNS, kernel_sequences

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
REFERENCE = json.loads((REAL / "hta_kernel_sequences_reference.json").read_text("utf-8"))
PATHS = {
    "hta_alexnet_first_steps": REAL / "hta_alexnet_first_steps.json.gz",
    "two_ranks": REAL / "two_ranks",
    "dlrm_8ranks": REAL / "dlrm_8ranks",
}
CASES = REFERENCE["cases"]


@pytest.fixture(scope="module")
def profiles() -> dict[str, popprof.Profile]:
    return {run: popprof.open(path) for run, path in PATHS.items()}


def _case_id(case: dict) -> str:
    return f"{case['run']}-r{case['rank']}-{case['operator']}-{case['min_length']}"


def test_reference_is_hta_050() -> None:
    assert (REFERENCE["tool"], REFERENCE["version"]) == ("HolisticTraceAnalysis", "0.5.0")
    assert {case["run"] for case in CASES} == set(PATHS)
    assert sum(len(case["rows"]) for case in CASES) >= 50  # several patterns, not only empty cases


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_rows_equal_hta(profiles: dict[str, popprof.Profile], case: dict) -> None:
    got = kernel_sequences(profiles[case["run"]], case["operator"], case["min_length"], case["rank"])
    assert list(got.columns) == list(COLUMNS)
    mine = [
        {
            "length": len(pattern),
            "head": pattern[:100],
            "sha256": hashlib.sha256(pattern.encode()).hexdigest(),
            "kernels": int(kernels),
            "count": int(count),
            "gpu_us": float(gpu_us),
            "cpu_us": float(cpu_us),
        }
        for pattern, kernels, count, gpu_us, cpu_us in got[
            ["pattern", "kernels", "count", "gpu_us", "cpu_us"]
        ].itertuples(index=False)
    ]
    assert mine == case["rows"]
    assert (got["rank"] == case["rank"]).all()
    assert all(p.split("|")[0] == op for p, op in zip(got["pattern"], got["operator"], strict=True))


def test_no_matching_operator_is_empty(profiles: dict[str, popprof.Profile]) -> None:
    got = kernel_sequences(profiles["hta_alexnet_first_steps"], "no_such_operator")
    assert got.empty
    assert list(got.columns) == list(COLUMNS)
    assert kernel_sequences(profiles["hta_alexnet_first_steps"], "").empty


def test_min_length_filters_calls(profiles: dict[str, popprof.Profile]) -> None:
    profile = profiles["two_ranks"]
    loose = kernel_sequences(profile, "autograd::engine", min_length=2, rank=1)
    strict = kernel_sequences(profile, "autograd::engine", min_length=4, rank=1)
    assert not strict.empty and len(strict) < len(loose)
    assert (strict["kernels"] >= 4).all()
    kept = loose[loose["kernels"] >= 4].sort_values("pattern").reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, strict.sort_values("pattern").reset_index(drop=True))


def test_rank_default_is_lowest(profiles: dict[str, popprof.Profile]) -> None:
    profile = profiles["two_ranks"]
    pd.testing.assert_frame_equal(
        kernel_sequences(profile, "autograd::engine"), kernel_sequences(profile, "autograd::engine", rank=0)
    )
    assert kernel_sequences(profile, "autograd::engine", rank=7).empty


#: (input, operator) for ``popprof summary --kernel-sequences``: several patterns, several ranks, none found
SUMMARY_CASES = [
    ("hta_alexnet_first_steps", "aten::conv2d"),
    ("two_ranks", "autograd::engine"),
    ("dlrm_8ranks", "ProfilerStep"),
    ("hta_alexnet_first_steps", "no_such_operator"),
]


@pytest.mark.parametrize(("run", "operator"), SUMMARY_CASES)
def test_summary_option_text_fits_and_json_is_the_api(
    profiles: dict[str, popprof.Profile], run: str, operator: str
) -> None:
    from click.testing import CliRunner

    from popprof.cli import cli

    def summary(*options: str) -> str:
        args = ["summary", str(PATHS[run]), "--kernel-sequences", operator, *options]
        result = CliRunner().invoke(cli, args, env={"COLUMNS": None})
        assert result.exit_code == 0, result.output
        return result.stdout

    text = summary()
    assert f"Kernel sequences under {operator!r}" in text
    assert not [line for line in text.splitlines() if len(line) > 80]
    section = json.loads(summary("--format", "json"))["trace"]["kernel_sequences"]
    assert (section["operator"], section["min_length"]) == (operator, 3)
    profile = profiles[run]
    ranks = sorted({row["rank"] for row in section["rows"]})
    expected = pd.concat([kernel_sequences(profile, operator, rank=r) for r in ranks] or [pd.DataFrame()])
    assert [row["pattern"] for row in section["rows"]] == list(expected.get("pattern", []))
    assert [row["count"] for row in section["rows"]] == list(expected.get("count", []))
    if not section["rows"]:
        assert "none: no call of it launched 3 or more kernels" in text


def test_profile_without_gpu_work_is_empty() -> None:
    profile = popprof.open(REAL.parent.parent / "mk2_training.popprof")
    got = kernel_sequences(profile, "x")
    assert got.empty and list(got.columns) == list(COLUMNS)


#: the reference's cases with a minimum length other than the default: the CLI's --min-sequence-length
NON_DEFAULT = [case for case in CASES if case["min_length"] != 3]


@pytest.mark.parametrize("case", NON_DEFAULT, ids=_case_id)
def test_cli_min_sequence_length_gives_htas_rows(case: dict) -> None:
    """``--min-sequence-length N`` is HTA's ``min_pattern_len``: the summary's JSON rows of the case's rank are
    HTA's own rows for that length (pattern text's hash, kernels, count), in HTA's order."""
    from click.testing import CliRunner

    from popprof.cli import cli

    args = ["summary", str(PATHS[case["run"]]), "--kernel-sequences", case["operator"]]
    args += ["--min-sequence-length", str(case["min_length"]), "--format", "json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    section = json.loads(result.stdout)["trace"]["kernel_sequences"]
    assert section["min_length"] == case["min_length"]
    mine = [row for row in section["rows"] if row["rank"] == case["rank"]]
    got = [(hashlib.sha256(r["pattern"].encode()).hexdigest(), r["kernels"], r["count"]) for r in mine]
    assert got == [(r["sha256"], r["kernels"], r["count"]) for r in case["rows"]]


def test_cli_min_sequence_length_below_one_is_a_usage_error() -> None:
    from click.testing import CliRunner

    from popprof.cli import cli

    args = [
        "summary",
        str(PATHS["hta_alexnet_first_steps"]),
        "--kernel-sequences",
        "x",
        "--min-sequence-length",
        "0",
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "--min-sequence-length" in result.output


def test_report_shows_the_sequences_of_the_summary(tmp_path: Path) -> None:
    """``popprof report --kernel-sequences OP`` adds a section with the patterns the summary's JSON gives (the
    first rows, each pattern's count and kernels); with no match it says so."""
    from click.testing import CliRunner

    from popprof.cli import cli

    path = PATHS["hta_alexnet_first_steps"]
    out = tmp_path / "r.html"
    args = ["report", str(path), "--kernel-sequences", "aten::conv2d", "--min-sequence-length", "5"]
    result = CliRunner().invoke(cli, [*args, "--no-plots", "-o", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text("utf-8")
    assert "Kernel sequences under <code>aten::conv2d</code>" in html
    table = html[html.index('<table class="kernel-sequences">') :]
    table = table[: table.index("</table>")]
    case = next(
        c for c in CASES if (c["run"], c["operator"], c["min_length"]) == (path.name[:-8], "aten::conv2d", 5)
    )
    assert table.count("<tr>") == 1 + len(case["rows"])  # the header, then HTA's rows
    for row in case["rows"]:
        assert f'<td class="num">{row["kernels"]}</td>' in table
    result = CliRunner().invoke(
        cli, ["report", str(path), "--kernel-sequences", "nothing_like_it", "--no-plots", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "None: no call of it launched 3 or more kernels." in out.read_text("utf-8")
