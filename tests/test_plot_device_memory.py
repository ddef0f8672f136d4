"""``popprof plot --kind device-memory`` (plots/device_memory.py): each device's memory over time, drawn from
the same curve and read against the same peak record as ``metrics.device_memory.device_memory``.

Inputs, the real traces with allocator events in ``fixtures/real/traces/`` (test_device_memory.py checks
their figures against the raw JSON): TraceLens's BERT-small on an H100 (96.6 MiB peak in aten::addmm), its
vLLM graph capture on an MI300X (178.5 GiB, rank 0) and Kineto's 2021 ResNet-50 (block sizes only: the net,
2.6 GiB, six ProfilerSteps).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

matplotlib = pytest.importorskip("matplotlib")

import popprof  # noqa: E402
from popprof.cli import main  # noqa: E402
from popprof.metrics.device_memory import device_memory, memory_over_time  # noqa: E402
from popprof.model.profile import Profile  # noqa: E402
from popprof.plots import available_kinds, default_kind, plot  # noqa: E402
from popprof.plots.device_memory import CAPACITY_DRAWN, envelope  # noqa: E402
from popprof.report.html import render  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TRACES = FIXTURES / "real" / "traces"
BERT = TRACES / "tracelens_h100_bert_small.json.gz"
CAPTURE = TRACES / "tracelens_mi300x_vllm_graph_capture.json.gz"
RESNET_2021 = TRACES / "kineto2021_resnet50_worker0.pt.trace.json.gz"
NO_ALLOCATIONS = FIXTURES / "traces" / "training_loop.json"
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module", params=[BERT, CAPTURE, RESNET_2021], ids=lambda p: p.name.split(".")[0])
def drawn(request):
    """(profile, its GPU's device_memory record, the figure)."""
    profile = popprof.open(request.param)
    (record,) = [r for r in device_memory(profile) if r["device"] != "cpu"]  # one GPU each (vLLM's: gpu:2)
    return profile, record, plot(profile, "device-memory")


def _artist(ax, gid: str):
    found = [a for a in (*ax.lines, *ax.texts, *ax.patches) if a.get_gid() == gid]
    assert len(found) == 1, (gid, found)
    return found[0]


def test_the_drawn_line_peaks_at_device_memorys_peak_in_bytes(drawn):
    _, record, fig = drawn
    (ax,) = fig.axes  # the host's cpu is drawn only without accelerator events
    assert ax.get_ylabel() == ("rank 0 gpu:2" if record["rank"] == 0 else "gpu:0")
    allocated = _artist(ax, "allocated").get_ydata()
    assert allocated.max() == record["peak_allocated_bytes"]  # bytes, exactly: no unit conversion
    marker = _artist(ax, "peak")
    assert marker.get_ydata()[0] == record["peak_allocated_bytes"]
    assert marker.get_xdata()[0] == pytest.approx(record["peak_at_us"] / 1e3)  # ms from the time origin


@pytest.mark.parametrize(
    ("path", "peak", "op"),
    [
        (BERT, 101_305_344, "aten::addmm"),
        (CAPTURE, 191_628_704_768, "<built-in function _empty_strided_cuda>"),
        (RESNET_2021, 2_791_636_480, "aten::cudnn_convolution_backward_weight"),
    ],
    ids=["bert", "vllm", "resnet2021"],
)
def test_the_peak_label_names_device_memorys_operator(path, peak, op):
    fig = plot(popprof.open(path), "device-memory")
    label = _artist(fig.axes[0], "peak-label").get_text()
    assert label.splitlines()[-1] == op
    assert _artist(fig.axes[0], "allocated").get_ydata().max() == peak


def test_reserved_and_capacity_where_the_trace_gives_them(drawn):
    _, record, fig = drawn
    ax = fig.axes[0]
    reserved = [line for line in ax.lines if line.get_gid() == "reserved"]
    if record["basis"] == "net":  # a 2021 trace: block sizes only, the net of them, no reserved
        assert reserved == []
        assert "net of the blocks" in _artist(ax, "allocated").get_label()
        assert record["peak_allocated_bytes"] == 2_791_636_480
    else:
        assert reserved[0].get_ydata().max() == record["peak_reserved_bytes"]
    capacity = record["capacity_bytes"]
    highest = max(record["peak_allocated_bytes"], record["peak_reserved_bytes"] or 0)
    if highest >= CAPACITY_DRAWN * capacity:  # vLLM: 180.3 GiB reserved of 192 GiB
        assert _artist(ax, "capacity").get_ydata()[0] == capacity
        assert record["device"] == "gpu:2" and record["rank"] == 0  # roctracer's number for HIP's device 0
    else:  # BERT (0.1 %), ResNet (8.2 %): named, not drawn, so the curve is not flattened
        assert "not drawn" in _artist(ax, "capacity-note").get_label()
        assert not [line for line in ax.lines if line.get_gid() == "capacity"]


def test_the_drawn_curve_is_memory_over_time():
    profile = popprof.open(RESNET_2021)
    curve = memory_over_time(profile)[(None, "gpu:0")]
    assert curve.attrs["basis"] == "net" and curve["reserved_bytes"].isna().all()
    assert len(curve) == 8_220
    line = _artist(plot(profile, "device-memory", resolution=len(curve)).axes[0], "allocated")  # every event
    np.testing.assert_array_equal(line.get_ydata(), curve["allocated_bytes"].to_numpy())
    np.testing.assert_allclose(line.get_xdata(), curve["at_us"].to_numpy() / 1e3)


def test_downsampling_keeps_the_peak_and_the_trough():
    profile = popprof.open(RESNET_2021)
    curve = memory_over_time(profile)[(None, "gpu:0")]
    fig = plot(profile, "device-memory", resolution=100)
    line = _artist(fig.axes[0], "allocated")
    assert len(line.get_ydata()) <= 3 * 100 + 1 < len(curve)
    assert line.get_ydata().max() == device_memory(profile)[0]["peak_allocated_bytes"]
    assert line.get_ydata().min() == curve["allocated_bytes"].min()


def test_envelope_keeps_each_columns_extremes_and_last_point():
    rng = np.random.default_rng(3)
    x = np.cumsum(rng.exponential(1.0, 300_000))
    y = np.cumsum(rng.normal(0, 1, 300_000))
    keep = envelope(x, y, 500)
    assert len(keep) <= 3 * 500 + 1 and np.all(np.diff(keep) > 0)
    assert keep[0] == 0 and keep[-1] == len(x) - 1
    assert y[keep].max() == y.max() and np.argmax(y) in keep  # the first of equals, as np.argmax
    column = np.minimum(((x - x[0]) / (x[-1] - x[0]) * 500).astype(int), 499)
    for c in (0, 137, 499):  # every column's own extremes, not only the whole line's
        inside = column == c
        assert y[keep][column[keep] == c].max() == y[inside].max()
        assert y[keep][column[keep] == c].min() == y[inside].min()
    np.testing.assert_array_equal(envelope(x[:900], y[:900], 500), np.arange(900))


def test_profiler_steps_are_shaded_in_turn_and_numbered():
    fig = plot(popprof.open(RESNET_2021), "device-memory")
    ax = fig.axes[0]
    shaded = sorted(p.get_gid() for p in ax.patches if str(p.get_gid()).startswith("step:"))
    assert shaded == ["step:5", "step:7", "step:9"]
    numbers = [t.get_text() for t in ax.texts if t.get_gid() == "step-label"]
    assert numbers == ["#5", "#6", "#7", "#8", "#9", "#10"]
    capture = plot(popprof.open(CAPTURE), "device-memory").axes[0]  # no ProfilerStep: nothing shaded
    assert not [a for a in (*capture.patches, *capture.texts) if str(a.get_gid()).startswith("step")]


def test_kinds_listed_and_the_default_unchanged():
    for path in (BERT, CAPTURE, RESNET_2021):
        profile = popprof.open(path)
        assert "device-memory" in available_kinds(profile)
        assert default_kind(profile) == "timeline"
    assert "device-memory" not in available_kinds(popprof.open(NO_ALLOCATIONS))


def test_a_trace_without_allocations_stops_with_one_line(tmp_path, capsys):
    out = tmp_path / "mem.png"
    code = main(["plot", str(NO_ALLOCATIONS), "--kind", "device-memory", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "cannot draw --kind device-memory" in err and "profile_memory=True" in err
    assert err.strip().endswith("it can draw: timeline, account, roofline")
    assert list(tmp_path.iterdir()) == []


def test_the_cli_writes_the_png_atomically(tmp_path, capsys, monkeypatch):
    out = tmp_path / "mem.png"
    out.write_bytes(b"the previous figure")
    seen = []
    savefig = matplotlib.figure.Figure.savefig

    def watching(fig, target, *args, **kwargs):
        seen.append((Path(target), out.read_bytes()))  # while drawing: another name, the old file intact
        return savefig(fig, target, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", watching)
    assert main(["-q", "plot", str(BERT), "--kind", "device-memory", "-o", str(out), "--dpi", "40"]) == 0
    [(target, during)] = seen
    assert target != out and target.parent == tmp_path and during == b"the previous figure"
    assert out.read_bytes().startswith(PNG)
    assert [p.name for p in tmp_path.iterdir()] == [out.name]


def test_the_report_shows_the_figure_beside_its_table():
    html = render(popprof.open(BERT))
    table = html.index('<table class="device-memory">')
    after = html[html.index("</table>", table) + len("</table>") :]
    assert after.lstrip().startswith("<figure>")
    assert "memory over time from the allocator" in after[: after.index("</figure>")]
    assert "<h3>device-memory</h3>" not in html  # not again among the plots
    assert "<h3>timeline</h3>" in html


def _devices_trace(peaks: dict[str, int]) -> Profile:
    """A trace of one operator per device, each allocating its block under it and freeing it: per device,
    a ``[memory]`` pair under ``aten::empty_like`` inside ``aten::mul`` with the allocator's totals."""
    names, parents, rows = [], [], []
    for k, (device, block) in enumerate(peaks.items()):
        op = len(names)
        names += ["aten::mul", "aten::empty_like", "[memory]", "[memory]"]
        parents += [-1, op, op + 1, op]
        rows += [(op + 2, 10.0 * k + 1, device, block), (op + 3, 10.0 * k + 4, device, -block)]
    n = len(names)
    events = pd.DataFrame(
        {
            "event_id": np.arange(n),
            "pid": 1,
            "tid": 1,
            "parent_id": parents,
            "depth": np.tile([0, 1, 2, 1], len(peaks)).astype(np.int16),
            "name": pd.Categorical(names),
            "channel": ["cpu_op", "cpu_op", "cpu_instant_event", "cpu_instant_event"] * len(peaks),
            "start_us": np.repeat(10.0 * np.arange(len(peaks)), 4)
            + np.tile([0.0, 0.5, 1.0, 4.0], len(peaks)),
            "dur_us": np.tile([5.0, 1.0, 0.0, 0.0], len(peaks)),
        }
    )
    ids, ts, devices, blocks = zip(*rows, strict=True)
    allocations = pd.DataFrame(
        {
            "event_id": ids,
            "pid": 1,
            "tid": 1,
            "ts_us": ts,
            "device": devices,
            "bytes": blocks,
            "total_allocated": np.maximum(blocks, 0) + (1 << 20),
            "total_reserved": np.full(len(ids), 1 << 34),
        }
    )
    return Profile("devices", {"events": events, "allocations": allocations})


def test_at_most_max_panels_the_highest_peaks_in_the_records_order():
    profile = _devices_trace({"gpu:0": 3 << 20, "gpu:1": 9 << 20, "gpu:2": 5 << 20, "cpu": 64 << 20})
    records = device_memory(profile)
    assert [r["device"] for r in records] == ["gpu:0", "gpu:1", "gpu:2", "cpu"]
    fig = plot(profile, "device-memory", max_panels=2)
    assert [ax.get_ylabel() for ax in fig.axes] == ["gpu:1", "gpu:2"]  # the cpu: only without accelerators
    assert "2 devices (1 more not drawn)" in fig.get_suptitle()
    for ax, device in zip(fig.axes, ("gpu:1", "gpu:2"), strict=True):
        record = next(r for r in records if r["device"] == device)
        assert _artist(ax, "allocated").get_ydata().max() == record["peak_allocated_bytes"]
        assert _artist(ax, "peak-label").get_text().splitlines()[-1] == "aten::mul" == record["peak_op"]
    cpu_only = _devices_trace({"cpu": 64 << 20})
    assert [ax.get_ylabel() for ax in plot(cpu_only, "device-memory").axes] == ["cpu"]
