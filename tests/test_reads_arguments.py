"""summary and check read a trace's arguments when its start records shapes or collectives' sizes.

The operator analysis (``docs/operations.md``) needs ``cpu_op`` input shapes and the collective analysis
(``docs/collectives.md``) the collectives' element counts; both live in the events' ``args``, which cost a
slower parse, as do a CUPTI range-profiler trace's counters (``docs/traces.md``, "Hardware counters"). The CLI
reads them when the trace's first MiB holds ``"Input Dims"``, ``"In msg nelems"`` or ``"cuda_profiler_range"``
(``popprof.readers.chrome.sniffing.records_arguments``); ``--shapes`` / ``--no-shapes`` decide otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from popprof.cli import main
from popprof.cli.common import reads_arguments
from popprof.model.errors import InputError
from popprof.readers.chrome.sniffing import reads_args, records_arguments

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"
TRACES = REAL / "traces"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("kineto2021_resnet50_worker0.pt.trace.json.gz", True),  # Input Dims of every cpu_op
        ("tracelens_mi300x_torch_compile_triton.json.gz", True),
        ("nccl_data.json.gz", True),  # no shapes, but the collectives' In msg nelems
        ("cupti_range_profiler.json.gz", False),  # its counters' args are read whatever: reads_args
        ("hta_simple_add.json.gz", False),  # no shapes, no collectives, no counters
    ],
)
def test_a_real_trace_says_whether_it_records_arguments(name, expected):
    assert records_arguments(TRACES / name) is expected


def test_the_reader_reads_a_range_profiler_traces_args_whatever_it_is_asked():
    """The one rule of the read and of the worker a command starts early: as asked, and always for a CUPTI
    range-profiler trace (its counters are its kernels' args)."""
    assert reads_args(TRACES / "cupti_range_profiler.json.gz", False) is True
    assert reads_args(TRACES / "hta_simple_add.json.gz", False) is False
    assert reads_args(TRACES / "hta_simple_add.json.gz", True) is True


def test_a_directory_of_ranks_is_judged_by_its_first_trace_and_other_formats_never():
    assert reads_arguments([TRACES / "dlrm_8ranks"], None) is True
    assert reads_arguments([REAL / "poplar" / "tutorials_tut6_execution_hw_sdk3.txt"], None) is False
    with pytest.raises(InputError, match="no such file"):  # said before anything is imported
        reads_arguments([TRACES / "no-such-file.json"], None)
    assert reads_arguments([TRACES / "cupti_range_profiler.json.gz"], True) is True  # --shapes
    assert reads_arguments([TRACES / "dlrm_8ranks"], False) is False  # --no-shapes


def _summary(capsys, *args: str) -> dict:
    assert main(["summary", *args, "--format", "json", "-q"]) == 0
    return json.loads(capsys.readouterr().out)


def test_summary_gives_the_operators_flops_without_a_flag_and_not_with_no_shapes(capsys):
    trace = str(TRACES / "tracelens_mi300x_torch_compile_triton.json.gz")
    with_shapes = _summary(capsys, trace)
    modelled = [row for row in with_shapes["operations"] if row["flops_per_call"]]
    assert modelled and all(row["tflops"] > 0 and row["bound"] in ("compute", "memory") for row in modelled)
    without = _summary(capsys, trace, "--no-shapes")
    assert not any(row["flops_per_call"] for row in without["operations"])
    assert without["operations_note"]  # says why there are no FLOPs


def test_summary_gives_the_collectives_bytes_of_a_real_trace_without_a_flag(capsys):
    by_type = _summary(capsys, str(TRACES / "nccl_data.json.gz"))["collectives"]["by_type"]
    assert by_type and all(row["bytes"] > 0 and row["busbw_gbps"] > 0 for row in by_type)


def test_the_report_reads_the_shapes_the_trace_records(tmp_path):
    trace = str(TRACES / "tracelens_mi300x_torch_compile_triton.json.gz")
    out = tmp_path / "with.html"
    assert main(["report", trace, "--no-plots", "-o", str(out), "-q"]) == 0
    assert "Estimated gain: up to 2.84 ms" in out.read_text("utf-8")  # operations.below-roofline, priced
    assert (
        main(["report", trace, "--no-plots", "--no-shapes", "-o", str(tmp_path / "without.html"), "-q"]) == 0
    )
    assert "Estimated gain: up to 2.84 ms" not in (tmp_path / "without.html").read_text("utf-8")
