"""Every real Poplar text sample (fixtures/real/poplar) and every text-summary fixture redacts with the
scan on, exits 0, gives text, and reads back to the same figures: same profiles, same tables, same
numbers (capacity and headroom among the computed metrics), same line count, every figure at the same
column; the summary's labels and public vertex names unchanged."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import popprof
from popprof.cli import cli
from popprof.metrics import compute
from popprof.redaction.names import summary_label

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TEXTS = sorted(
    p
    for p in [*(FIXTURES / "real" / "poplar").glob("*.txt"), *(FIXTURES / "text_summary").glob("*.txt")]
    if not p.name.startswith("LICENSE")
)
KEY = "real-text-test-key-0123456789"
_LABEL = re.compile(r"^\s*([^:\s][^:]*?)\s*:")


def _redact(src: Path, out: Path) -> str:
    result = CliRunner().invoke(cli, ["redact", str(src), "-o", str(out)], env={"POPPROF_REDACT_KEY": KEY})
    assert result.exit_code == 0, f"{src.name}: {result.output}"
    return result.output


_FIGURE = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?![\w.])")


def _figures(line: str) -> list[tuple[int, str]]:
    """Each number of a line with the column it starts at."""
    return [(m.start(), m.group()) for m in _FIGURE.finditer(line)]


def _numeric(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.select_dtypes(include="number").reset_index(drop=True)


@pytest.mark.parametrize("src", TEXTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_text_redacts_to_the_same_figures(tmp_path, src):
    out = tmp_path / src.name
    _redact(src, out)
    assert out.is_file()  # a text input gives a text output, never a bundle directory
    before, after = src.read_text(), out.read_text()
    assert after.count("\n") == before.count("\n")
    try:
        a = popprof.open_all(src)
    except popprof.InputError:  # a part of a summary that no reader takes: neither is the output read
        with pytest.raises(popprof.InputError):
            popprof.open_all(out)
        a = {}
    b = popprof.open_all(out) if a else {}
    assert len(a) == len(b)
    for (name_a, pa), (_, pb) in zip(sorted(a.items()), sorted(b.items()), strict=True):
        assert sorted(pa.tables) == sorted(pb.tables), name_a
        for table in pa.tables:
            ta, tb = pa.get(table), pb.get(table)
            assert ta.shape == tb.shape, (name_a, table)
            pd.testing.assert_frame_equal(
                _numeric(ta), _numeric(tb), check_dtype=False, obj=f"{name_a}.{table}"
            )
        assert compute(pa) == compute(pb)
    for line_a, line_b in zip(before.splitlines(), after.splitlines(), strict=True):
        if not line_b.startswith("line_"):  # every figure stays, at the same column (alignment kept)
            assert _figures(line_a) == _figures(line_b), (line_a, line_b)
        m = _LABEL.match(line_a)
        if m and summary_label(m.group(1)):
            assert line_b.startswith(line_a[: m.end()]), (line_a, line_b)  # the label stays, in place


def test_public_vertex_names_stay_and_columns_stay_aligned(tmp_path):
    src = tmp_path / "exec.txt"
    src.write_text(
        "Execution:\n\n"
        "  Total cycles:                                         178,569,036 (approx 111,605.6 microseconds)\n"
        "  Tile average compute cycles (including idle threads): 207,965.0 (0.1% of total)\n\n"
        "  Cycles by vertex type:\n"
        "    popops::Zero2d<float>              (14592 instances):   17,612,544\n"
        "    poplar_rt::DstLongStridedCopy       (7298 instances):   11,521,852\n"
        "    poplar_rt::ShortMemcpy             (12744 instances):      973,414\n"
        "    Fill<float>                         (2432 instances):      243,200\n"
        "    QzvHaloSecretApproach<float>        (2432 instances):      243,200\n"
    )
    out = tmp_path / "red.txt"
    _redact(src, out)
    lines = out.read_text().splitlines()
    text = "\n".join(lines)
    for public in (
        "popops::Zero2d<float>",
        "poplar_rt::DstLongStridedCopy",
        "poplar_rt::ShortMemcpy",
        "Fill<float>",
    ):
        assert public in text
    assert "Qzv" not in text and "vtx_" in text
    original = src.read_text().splitlines()
    for a, b in zip(original, lines, strict=True):
        if "instances" in a:
            assert a.index("(") == b.index("("), (a, b)  # the figures start in the same column


def test_ordinary_log_lines_are_replaced_whole(tmp_path):
    src = FIXTURES / "real" / "poplar" / "devito_wave3d_oom_log_mk2.txt"
    out = tmp_path / "log.txt"
    _redact(src, out)
    for line in out.read_text().splitlines():
        assert "norm" not in line and "Benchmark" not in line  # never word by word
        if "Out of memory on tile" in line:
            assert re.search(r"line_[0-9a-f]{12} Out of memory on tile \d+: \d+ bytes used", line), line
    assert any(re.fullmatch(r"line_[0-9a-f]{12}", line) for line in out.read_text().splitlines())


def test_programs_executed_list_after_a_blank_line(tmp_path):
    """SDK 2.x/3.x layout (fixtures/real/poplar/README.md): "Programs executed:", a blank line, then the
    list; Poplar's own program names stay, a user's program name is replaced."""
    src = tmp_path / "exec.txt"
    src.write_text(
        "Execution:\n\n  Programs executed:\n\n  main, main, QzvSecretProgram.\n\n"
        "  Total cycles:                                         25,444,984 (approx 19,131.6 microseconds)\n"
    )
    out = tmp_path / "red.txt"
    _redact(src, out)
    text = out.read_text()
    assert "  main, main, prog_" in text and "Qzv" not in text
    assert (
        popprof.open(out).execution_totals["cycles"].tolist()
        == popprof.open(src).execution_totals["cycles"].tolist()
    )
