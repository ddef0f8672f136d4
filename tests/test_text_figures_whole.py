"""No figure of the text for people is split across lines, at any width (docs/figures.md, "How text prints").

"No line wider than 80" (``tests/test_text_width_sweep.py``) does not catch a figure wrapped through: a
line that starts with a figure's unit or its binary tail, or a number broken by a wrap. Found at
``COLUMNS=60``/``80``/``100`` (2026-12-07) and fixed at their source:

- ``check fixtures/mk1_noexec.popprof`` (80): ``tile 671 holds 253,089 B (247.2 KiB) = 1.76 x the median
  tile (143,734 B`` / ``(140.4 KiB)) and 96.5 % of capacity``; the same in ``diff`` gate lines
  (``FAIL memory.max_tile_headroom_bytes is -195,282 B (-190.7 KiB) (was 30,034 B`` / ``(29.3 KiB))``,
  mk2_training vs mk2_oom): the prose wrap bound a number to its unit, not bytes to their binary tail;
- ``summary fixtures/mk1_noexec.popprof`` (60): the fullest tile's rows ``vertexCode   19,033 B`` /
  ``(18.6 KiB)`` (a 44-column name whatever the width) and ``busiest IPU 24,130,123`` / ``cycles``;
- ``summary hta_trace_compare_base.json.gz`` (80): ``launch call time 4.0`` / ``us`` (a plain textwrap);
- ``summary pipit_saxpy_mpi_cuda_perlmutter.sqlite`` (80), ``check dlrm_8ranks`` (60): a time and its
  share, ``off CPU 723.87 ms`` / ``(100.0 %)``;
- ``summary fixtures/traces/training_loop.json`` (60): Top kernels' rows (75 columns and the type) wrapped
  through their columns, ``14.18 ms  132  107.4 us  80.9 us  139.7 us`` / ``15.5 us  COMP``; the same in
  ``nccl_data.json.gz``'s host-device copies (``DtoD  960  293.1 MiB`` / ``2.26 ms  135.8 GB/s``) and
  collectives (``all_reduce  15  46.76 ms  0.0 us  0.0 %`` / ``6.56 GB/s``);
- ``summary amd_mi250_minitoy.json.gz`` (80): ``hipMemcpyWithStream 2 x`` / ``95.8 us`` (the count and its
  ``x`` were bound, not the figure after);
- ``summary tracelens_h100_bert_small.json.gz`` (60): an operator's input shapes at column 52, wrapped 4
  columns at a time (``3052`` / ``2, 1`` / ``41x5``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from real_inputs import REAL

from popprof.cli import cli

FIXTURES = REAL.parent
TRACES = REAL / "traces"
UNITS = r"(?:ns|us|ms|s|%|pp|B|KiB|MiB|GiB|TiB|GB/s|TB/s|x|cycles)"
#: A line that starts (after its indent) with a figure's binary tail, ``(289.2 MiB)``, ``(+1.6 MiB)``, the
#: figure ending the line before (after a name, ``loss/Mul_239/StreamCopy`` / ``(24.3 %)``, it is prose).
_TAIL = re.compile(rf"^\([+-]?[\d.,]+ {UNITS}\)")
#: A line that starts with a bare unit, its number ending the line before.
_UNIT = re.compile(rf"^{UNITS}(?=[\s,;:.)]|$)")


def split_figures(text: str) -> list[str]:
    """The lines of ``text`` where a figure is split, each with the line before it."""
    lines = text.splitlines()
    return [
        f"{before}\n{line}" for before, line in zip(["", *lines], lines, strict=False) if _split(before, line)
    ]


def _split(before: str, line: str) -> bool:
    head, tail = before.rstrip(), line.strip()
    return bool(
        (_TAIL.match(tail) and re.search(rf"\d {UNITS}$", head))  # a figure, its tail on the next line
        or (_UNIT.match(tail) and re.search(r"(?:^|[\s(])[+-]?[\d.,]*\d$", head))  # its number, not Int64
        or (
            re.search(r"(?<![\dx])\d{1,3}(,\d{3})*,$", head) and re.match(r"\d{3}(?![\dx])", tail)
        )  # 1,234, / 567
        or (re.search(r"\d x$", head) and re.match(r"[+-]?\d", tail))  # 2 x / 95.8 us
        or (  # a table row wrapped through its columns: the line continuing it (4 deeper) starts with a figure
            _indent(line) == _indent(before) + 4  # fit_lines' HANG (a layout's own second line is not)
            and not _aligned(before, _indent(line))  # a list's next item under its first (phases in check)
            and re.search(rf"(?:^|\s)[+-]?[\d.,]*\d(?: {UNITS})?$", head)
            and re.match(r"[+-]?\d", tail)
        )
    )


def _aligned(before: str, column: int) -> bool:
    """Whether a token of ``before`` starts at ``column`` (the line under it is a list's next item)."""
    return 0 < column < len(before) and before[column - 1] == " " and before[column] != " "


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


@pytest.mark.parametrize(
    "text",
    [
        "  tile (143,734 B\n  (140.4 KiB)) and 96.5 %",
        "  vertexCode                                   19,033 B\n      (18.6 KiB)",
        "    2 runs, 2,000 steps on 1 IPU; busiest IPU 24,130,123\n      cycles = 18.14 ms",
        "Kernel launches: 1, launch call time 4.0\n  us",
        "  execution.share.exchange  12.5 %   15.1 %   +2.64\n  pp  +21.22 %",
        "  gain: up to 1,234,\n      567 us",
        "  Host blocked on device: 163.6 us: hipMemcpyWithStream 2 x\n      95.8 us",
        "      14.18 ms      132    107.4 us     80.9 us    139.7 us\n          15.5 us  COMP",
    ],
)
def test_the_detector_finds_the_splits_that_were_printed(text: str):
    assert split_figures(text)


def test_the_detector_passes_whole_figures_and_wrapped_prose():
    text = (
        "  tile 671 holds 253,089 B (247.2 KiB) = 1.76 x the median tile\n"
        "      (143,734 B (140.4 KiB)) and 96.5 % of capacity\n"
        "  cycles by category (summed over IPUs):\n"
        "      where: phases  +105.17 ms to +131.60 ms\n"
        "                     +323.16 ms to +349.58 ms\n"
        "      instances                Int64\n"
        "      cycles                   Int64\n"
        "      host stream copies take 10.3 % in loss/Mul_239/StreamCopy\n"
        "      (24.3 %), optimizer/adam/LayerNorm_4/StreamCopy\n"
        "    19,805 events on 48 threads, 8 ranks (0, 1, 2, 3, 4, 5, 6,\n"
        "        7); 20.87 ms from the first event to the last"
    )
    assert not split_figures(text)


def _run(*args: object, columns: int) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args], env={"COLUMNS": str(columns)})
    assert result.exit_code in (0, 1), result.output
    return result.stdout


BUNDLE = FIXTURES / "mk1_noexec.popprof"
COMMANDS = [
    ("summary", BUNDLE),
    ("check", BUNDLE),
    ("summary", FIXTURES / "mk2_oom.popprof"),
    ("check", FIXTURES / "mk2_oom.popprof"),
    ("summary", FIXTURES / "mk2_training.popprof"),
    ("summary", TRACES / "hta_trace_compare_base.json.gz"),
    ("summary", TRACES / "nccl_data.json.gz"),
    ("check", TRACES / "nccl_data.json.gz"),
    ("summary", FIXTURES / "traces" / "training_loop.json"),
    ("summary", TRACES / "amd_mi250_minitoy.json.gz"),
    ("summary", TRACES / "tracelens_h100_bert_small.json.gz"),
    ("check", TRACES / "tracelens_h100_bert_small.json.gz"),
    ("summary", REAL / "poplar" / "tutorials_tut6_execution_hw_sdk3.txt"),
    ("summary", REAL / "nsys" / "pipit_saxpy_mpi_cuda_perlmutter.sqlite"),
    ("check", TRACES / "dlrm_8ranks"),
    ("tables", REAL / "poplar" / "examples_tut7_execution_sdk1_mk1.txt"),
    ("query", FIXTURES / "mk2_training.popprof", "SELECT * FROM tiles ORDER BY bytes_incl_gaps DESC LIMIT 8"),
    ("rules",),
    ("diff", FIXTURES / "mk2_training.popprof", FIXTURES / "mk2_oom.popprof"),
    ("diff", FIXTURES / "mk2_training.popprof", FIXTURES / "mk2_training_v2.popprof"),
    ("diff", TRACES / "hta_trace_compare_base.json.gz", TRACES / "hta_trace_compare_test.json.gz"),
    # "What changed in device memory": operators' names beside byte figures, a net trace's note
    (
        "diff",
        TRACES / "kineto2021_resnet50_worker0.pt.trace.json.gz",
        TRACES / "tracelens_h100_bert_small.json.gz",
    ),
    ("pilot", FIXTURES / "mk2_training.popprof", "--baseline", FIXTURES / "pod4_pipeline.popprof"),
]


@pytest.mark.parametrize("columns", [60, 80, 100])
@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: "-".join([a[0], *(Path(p).name for p in a[1:2])]))
def test_no_figure_is_split_across_lines(args: tuple, columns: int):
    text = _run(*args, columns=columns)
    assert text.strip()
    assert not split_figures(text), "\n--\n".join(split_figures(text))


def test_an_operators_input_shapes_are_whole_at_60_columns():
    """Its shapes were at column 52 whatever the width: at 60 wrapped 4 columns at a time."""
    path = TRACES / "tracelens_h100_bert_small.json.gz"
    wide = [line.strip() for line in _run("summary", path, columns=80).splitlines() if "inputs " in line]
    narrow = _run("summary", path, columns=60).splitlines()
    assert wide and [line.strip() for line in narrow if "inputs " in line] == wide
    assert all(len(line) <= 60 for line in narrow if "inputs " in line)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A store of the mk2 bundle and its v2 as one series (a change for trend), the DLRM run twice (ranks
    for fleet) and the NCCL trace."""
    root = tmp_path_factory.mktemp("figures") / "store"
    runner = CliRunner()

    def add(*args: object) -> None:
        result = runner.invoke(cli, ["-q", "store", "add", str(root), *map(str, args)], env={"COLUMNS": None})
        assert result.exit_code == 0, result.output

    assert runner.invoke(cli, ["store", "init", str(root)]).exit_code == 0
    for day in (1, 2):
        add(TRACES / "dlrm_8ranks", "--run-id", f"dlrm-{day}", "--time", f"2026-12-0{day}")
    add(TRACES / "nccl_data.json.gz", "--branch", "main")
    for bundle, commit, day in (("mk2_training", "1f" * 20, 3), ("mk2_training_v2", "2e" * 20, 4)):
        add(
            FIXTURES / f"{bundle}.popprof",
            "--profile",
            "mk2",
            "--commit",
            commit,
            "--time",
            f"2026-12-0{day}",
        )
    return root


@pytest.mark.parametrize("columns", [60, 80, 100])
def test_no_figure_is_split_in_a_store_s_text(store: Path, columns: int):
    metrics = ["execution.total_cycles", "memory.total_incl_gaps_bytes", "trace.device_idle_us"]
    for args in (("store", "ls", store), ("trend", "show", store, *metrics), ("fleet", "ranks", store)):
        text = _run(*args, columns=columns)
        assert text.strip(), args
        assert not split_figures(text), "\n--\n".join(split_figures(text))
