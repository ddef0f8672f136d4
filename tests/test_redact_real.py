"""Every real trace and every fixture redacts with exit 0 under the default policy, and the output gives the
same figures as the input: metrics, rule findings, ``diff`` metrics, per-device time, and the leak scan
run on its own against the original passes.

Real traces: fixtures/real/traces (PyTorch profiler / Kineto, from HolisticTraceAnalysis, MIT; see the
README there).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import popprof
from popprof.cli import cli
from popprof.metrics import compute
from popprof.redaction import scan

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
REAL = sorted((FIXTURES / "real" / "traces").rglob("*.json.gz"))
OTHERS = sorted(
    [
        *FIXTURES.glob("*.popprof"),
        *(FIXTURES / "text_summary").glob("*.txt"),
        *(FIXTURES / "sdk1_json").glob("*.json"),
        *(FIXTURES / "traces").glob("*.json*"),
    ]
)
KEY = "real-trace-test-key-77"
#: The annotations' family: its members are named by the trace, so redaction renames them.
ANNOTATIONS = "trace.gpu_annotation_us."
FINDING_COLUMNS = ["rule_id", "severity", "value", "threshold"]


def _out_name(src: Path) -> str:
    if src.is_dir() or "sdk1_json" in src.parts:
        return "out.popprof"
    return src.name


def _redact_cli(src: Path, out: Path) -> None:
    result = CliRunner().invoke(cli, ["redact", str(src), "-o", str(out)], env={"POPPROF_REDACT_KEY": KEY})
    assert result.exit_code == 0, f"{src.name}: {result.output}"


def _device_time(profile) -> pd.DataFrame:
    """Per (pid, tid) time by device category: what per-device figures are computed from."""
    events = profile.get("events")
    if events is None or not len(events):
        return pd.DataFrame()
    frame = events.assign(device_category=events["device_category"].astype(str))
    return frame.groupby(["pid", "tid", "device_category"], observed=True)["dur_us"].agg(["sum", "count"])


def _renamed_annotations(a, b) -> dict[str, str]:
    """Each GPU annotation name of ``a`` -> its name in ``b`` (the same events, matched by start and duration)."""
    rows = []
    for profile in (a, b):
        events = profile.get("events")
        if events is None or "channel" not in events.columns:
            return {}
        mine = events[events["channel"].astype(str) == "gpu_user_annotation"]
        rows.append(mine.sort_values(["start_us", "dur_us"], kind="stable")["name"].astype(str).tolist())
    assert len(rows[0]) == len(rows[1])
    return dict(zip(*rows, strict=True))


def _same_metrics(a, b) -> None:
    """The same metrics; the annotations' members, named by the trace's ``record_function`` ranges, under their
    redacted names (a public name such as ``nccl:all_reduce`` keeps its own)."""
    before, after = compute(a), compute(b)
    named = [{k: v for k, v in values.items() if k.startswith(ANNOTATIONS)} for values in (before, after)]
    assert {k: v for k, v in before.items() if k not in named[0]} == {
        k: v for k, v in after.items() if k not in named[1]
    }
    renamed = _renamed_annotations(a, b)
    expected = {}
    for key, value in named[0].items():
        name = key[len(ANNOTATIONS) :]
        expected[ANNOTATIONS + renamed.get(name, name)] = value
    assert named[1] == expected


def _same_figures(src: Path, out: Path) -> None:
    a, b = popprof.open(src), popprof.open(out)
    _same_metrics(a, b)
    pd.testing.assert_frame_equal(
        popprof.check(a).frame[FINDING_COLUMNS].reset_index(drop=True),
        popprof.check(b).frame[FINDING_COLUMNS].reset_index(drop=True),
    )
    pd.testing.assert_frame_equal(_device_time(a), _device_time(b))
    try:
        from popprof.metrics.devices import device_breakdown
    except ImportError:
        return
    numbers = lambda f: f.select_dtypes("number").reset_index(drop=True)  # noqa: E731
    pd.testing.assert_frame_equal(numbers(device_breakdown(a)), numbers(device_breakdown(b)))


@pytest.mark.parametrize("src", REAL, ids=[p.relative_to(FIXTURES).as_posix() for p in REAL])
def test_real_trace_redacts_with_exit_0_and_same_figures(src, tmp_path):
    out = tmp_path / src.name
    _redact_cli(src, out)
    _same_figures(src, out)
    assert scan(out, against=src).passed


def test_real_traces_diff_the_same_after_redaction(tmp_path):
    base, new = (
        FIXTURES / "real" / "traces" / "two_ranks" / "rank-0.json.gz",
        FIXTURES / "real" / "traces" / "two_ranks" / "rank-1.json.gz",
    )
    (tmp_path / "b").mkdir()
    (tmp_path / "n").mkdir()
    rb, rn = tmp_path / "b" / base.name, tmp_path / "n" / new.name
    _redact_cli(base, rb)
    _redact_cli(new, rn)
    before, after = popprof.diff(base, new).metrics, popprof.diff(rb, rn).metrics
    pd.testing.assert_frame_equal(before, after)


@pytest.mark.parametrize("src", OTHERS, ids=[p.relative_to(FIXTURES).as_posix() for p in OTHERS])
def test_fixture_redacts_with_exit_0_and_same_figures(src, tmp_path):
    out = tmp_path / _out_name(src)
    _redact_cli(src, out)
    _same_figures(src, out)


def test_public_gpu_names_stay_readable_and_user_names_do_not(tmp_path):
    src = FIXTURES / "real" / "traces" / "nccl_data.json.gz"
    out = tmp_path / src.name
    _redact_cli(src, out)
    names = set(popprof.open(out).events["name"].astype(str))
    original = set(popprof.open(src).events["name"].astype(str))
    public = [
        n
        for n in original
        if n.startswith(
            (
                "ncclKernel_",
                "Memcpy ",
                "cuda",
                "aten::",
                "ProfilerStep#",
                "void cudnn::",
                "void at::native::",
                "void cutlass::",
            )
        )
    ]
    assert len(public) > 50
    assert set(public) <= names
    # names that are not public vocabulary (mangled symbols can carry any identifier) are replaced
    assert any(n.startswith("_ZN") for n in original) and not any(n.startswith("_ZN") for n in names)


def test_real_2021_gpu_trace_keeps_its_public_metadata_names_and_keys(tmp_path):
    """pytorch/kineto's 2021 ResNet-50 sample (fixtures/real/traces/README.md): device properties, every
    key (``external id``, ``est. achieved occupancy %``...), category (``Operator``, ``async``), public name
    (operators of PyTorch 1.9, ``ReluBackward1``, cuDNN and cuBLAS kernels, ``[memory]``, the DataLoader
    record function) stays as it is; only the call stacks (the author's paths and script) are replaced."""
    import gzip
    import json

    src = FIXTURES / "real" / "traces" / "kineto2021_resnet50_worker0.pt.trace.json.gz"
    out = tmp_path / src.name
    _redact_cli(src, out)
    before, after = (json.loads(gzip.decompress(p.read_bytes())) for p in (src, out))
    assert {k: v for k, v in before.items() if k != "traceEvents"} == {
        k: v for k, v in after.items() if k != "traceEvents"
    }
    assert len(before["traceEvents"]) == len(after["traceEvents"])
    for a, b in zip(before["traceEvents"], after["traceEvents"], strict=True):
        assert list(a) == list(b)
        assert {k: v for k, v in a.items() if k != "args"} == {k: v for k, v in b.items() if k != "args"}
        args_a, args_b = a.get("args", {}), b.get("args", {})
        assert list(args_a) == list(args_b)
        for key, value in args_a.items():
            if key != "Call stack":
                assert args_b[key] == value, (key, value)
    text = gzip.decompress(out.read_bytes()).decode()
    assert "yangu" not in text and "resnet50_profiler_api.py" not in text
    for public in ("ReluBackward1", "aten::cudnn_convolution_backward_weight", "volta_scudnn_128x64_relu_small_nn_v1",
                   "Tesla V100-DGXS-32GB", '"Operator"', "[memory]"):  # fmt: skip
        assert public in text
