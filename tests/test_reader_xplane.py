"""The XPlane reader (``popprof.readers.xplane``) on two real JAX profiles, checked against xprof.

``fixtures/real/xplane/`` holds AMD TraceLens's test files (MIT; provenance in the README there): a minimal 3D
convolution in bf16 on an 8-GPU MI300X node, profiled with ``jax.profiler`` under JAX 0.8
(``jax08_conv_mi300x.xplane.pb``) and JAX ~0.6 (``jax06_conv_mi300x.xplane.pb``). ``xplane_reference.json``
holds xprof's figures (``make_xplane_reference.py``: xprof's own conversion of each file to its trace viewer
JSON; versions in the file): per GPU the events of its ``Stream #`` lines, their summed time, the window, the
busy time (their union) and the top names with counts and totals. popprof's counts must be equal and its
times within 1 ns.

Derived lines, host events, args, detection (a file, a ``plugins/profile/<run>/`` directory) and bad input
(truncated, random, empty, no protobuf library) are checked on the real files and on copies changed through
the reader's own message classes in ``tmp_path``.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import summary_error

from popprof.cli import main
from popprof.metrics.devices import device_breakdown, launch_delays, top_kernels
from popprof.model.errors import InputError
from popprof.readers import detect, read_path
from popprof.readers.xplane import proto
from popprof.readers.xplane.planes import COPY_NAMES

HERE = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "xplane"
JAX08 = HERE / "jax08_conv_mi300x.xplane.pb"
JAX06 = HERE / "jax06_conv_mi300x.xplane.pb"
NS = 1e-3  # one nanosecond in microseconds


@pytest.fixture(scope="module")
def reference() -> dict:
    return json.loads((HERE / "xplane_reference.json").read_text())


@pytest.fixture(scope="module")
def profiles() -> dict:
    return {JAX08.name: read_path(JAX08), JAX06.name: read_path(JAX06)}


def _space(path: Path):
    """The file parsed with the reader's message classes, to change and write back."""
    space = proto.xspace_class()()
    space.ParseFromString(path.read_bytes())
    return space


def _union(start: np.ndarray, end: np.ndarray) -> float:
    total, reach = 0.0, -np.inf
    for s, e in sorted(zip(start.tolist(), end.tolist(), strict=True)):
        if e > reach:
            total += e - max(s, reach)
            reach = e
    return total


def test_both_files_are_detected_by_name():
    assert detect(JAX08).FORMAT == "xplane"
    assert detect(JAX06).FORMAT == "xplane"


@pytest.mark.parametrize("name", [JAX08.name, JAX06.name])
def test_gpu_work_matches_xprof(profiles, reference, name):
    """Per GPU: events, summed time, window and busy time as xprof's trace viewer has them."""
    profile, expected = profiles[name], reference["files"][name]["devices"]
    events = profile.events
    work = events[events["device"].notna()]
    assert sorted(work["device"].astype(str).unique()) == sorted(expected)
    breakdown = device_breakdown(profile).set_index("device")
    for device, figures in expected.items():
        mine = work[work["device"] == device]
        start = mine["start_us"].to_numpy()
        end = start + mine["dur_us"].to_numpy()
        assert len(mine) == figures["events"]
        assert mine["dur_us"].sum() == pytest.approx(figures["sum_us"], abs=NS)
        assert start.min() == pytest.approx(figures["window_us"][0], abs=NS)
        assert end.max() == pytest.approx(figures["window_us"][1], abs=NS)
        assert _union(start, end) == pytest.approx(figures["busy_us"], abs=NS)
        row = breakdown.loc[device]  # what summary and check read
        assert row["busy_us"] == pytest.approx(figures["busy_us"], abs=NS)
        assert row["span_us"] == pytest.approx(figures["window_us"][1] - figures["window_us"][0], abs=NS)
        assert row["work_items"] == figures["events"]


@pytest.mark.parametrize("name", [JAX08.name, JAX06.name])
def test_top_names_match_xprof(profiles, reference, name):
    """xprof's ten names with the most time on each GPU: the same count and total (copies under Kineto's names)."""
    events = profiles[name].events
    for device, figures in reference["files"][name]["devices"].items():
        mine = (
            events[events["device"] == device].groupby("name", observed=True)["dur_us"].agg(["count", "sum"])
        )
        for label, count, total in figures["top"]:
            row = mine.loc[COPY_NAMES.get(label, label)]
            assert (int(row["count"]), row["sum"]) == (count, pytest.approx(total, abs=NS)), (device, label)


def test_kernels_copies_and_their_categories(profiles):
    """JAX 0.6 put its 53 device-to-device copies on gpu:0 (``Stream #N(MemcpyOther)``) and the convolution on
    gpu:7: copies are ``Memcpy DtoD`` (memory work, ``other``), kernels compute."""
    events = profiles[JAX06.name].events
    work = events[events["device"].notna()]
    copies = work[work["device"] == "gpu:0"]
    assert set(copies["channel"].astype(str)) == {"gpu_memcpy"}
    assert set(copies["name"].astype(str)) == {"Memcpy DtoD"}
    assert set(copies["device_category"].astype(str)) == {"other"}
    assert sorted(copies["stream"].unique().tolist()) == [7, 8, 9, 10]
    kernels = work[work["device"] == "gpu:7"]
    assert set(kernels["channel"].astype(str)) == {"kernel"}
    assert set(kernels["device_category"].astype(str)) == {"compute"}
    assert len(kernels) == 25 and kernels["correlation"].notna().all()
    assert set(events.loc[events["device"].isna(), "device_category"].dropna().astype(str)) <= {"host_wait"}


def test_top_kernels_and_launch_delays(profiles):
    """The summary's top kernels over the 8 GPUs of the JAX 0.8 file (five steps each), and the host's HIP launch
    calls joined with their kernels by ``correlation_id``."""
    top = top_kernels(profiles[JAX08.name], top=3)
    assert top["name"].tolist()[0] == "input_transpose_fusion.kd"
    assert top["count"].tolist()[0] == 40
    assert top["total_us"].tolist()[0] == pytest.approx(14344.14, abs=NS)
    delays = launch_delays(profiles[JAX08.name])
    assert len(delays) == 7 * 25 + 23  # gpu:0 ran 23 of its 60 items from launches on the host threads
    assert (delays["launch_delay_us"] >= 0).all()
    assert set(delays["launch"].astype(str)) >= {"hipModuleLaunchKernel"}


def test_host_lines_are_threads_of_one_process(profiles):
    events, threads = profiles[JAX08.name].events, profiles[JAX08.name].threads
    host = events[events["device"].isna()]
    assert host["stream"].isna().all()
    channels = host.groupby("channel", observed=True).size()
    assert set(channels.index.astype(str)) == {"cuda_runtime", "python_function", "trace_me"}
    runtime = host[host["channel"] == "cuda_runtime"]
    assert runtime["correlation"].notna().all()
    assert {"hipModuleLaunchKernel", "hipMemcpyDtoDAsync"} <= set(runtime["name"].astype(str))
    assert host.loc[host["channel"] == "python_function", "name"].astype(str).str.startswith("$").all()
    names = threads.set_index(["pid", "tid"])
    assert names.loc[(0, 16), "thread_name"] == "Stream #16(Kernel)"
    assert names.loc[(0, 16), "process_name"] == "/device:GPU:0"
    assert (threads.loc[threads["pid"] == 1_000_000, "process_name"] == "/host:CPU (tw003)").all()
    assert "python" in set(threads["thread_name"])


def test_metadata_records_the_planes_and_the_gpus(profiles):
    meta = profiles[JAX08.name].meta
    assert meta["source_format"] == "xplane"
    assert json.loads(meta["xplane.hostnames"]) == ["tw003"]
    planes = {p["name"]: p for p in json.loads(meta["xplane.planes"])}
    assert planes["/device:GPU:0"]["events"] == 60 and planes["/host:CPU"]["lines"] == 32
    gpus = json.loads(meta["xplane.gpus"])
    assert [g["gpu"] for g in gpus] == list(range(8))
    assert gpus[0]["device_vendor"] == "AMD" and gpus[0]["core_count"] == 304
    assert int(meta["xplane.profile_start_time_ns"]) == 1_771_595_639_214_724_894
    assert "xplane.skipped_lines" not in meta  # these files hold no derived lines


def test_args_hold_the_stats(tmp_path):
    events = read_path(JAX08, with_args=True).events
    kernel = events[(events["device"] == "gpu:1") & (events["name"] == "loop_transpose_fusion.kd")].iloc[0]
    args = json.loads(kernel["args"])
    assert args["hlo_op"] == "loop_transpose_fusion" and args["hlo_module"] == "jit_forward_3d_conv"
    assert args["correlation_id"] == kernel["correlation"]
    assert "grid:1280,1,1" in args["kernel_details"]


def test_derived_lines_are_left_out_and_counted(tmp_path):
    """An ``XLA Ops`` line on a GPU plane (xprof derives one per stream) does not add device work."""
    space = _space(JAX06)
    gpu7 = next(p for p in space.planes if p.name == "/device:GPU:7")
    stream = gpu7.lines[0]
    derived = gpu7.lines.add(id=99, name="XLA Ops", timestamp_ns=stream.timestamp_ns)
    for event in stream.events:
        derived.events.add(
            metadata_id=event.metadata_id, offset_ps=event.offset_ps, duration_ps=event.duration_ps
        )
    path = tmp_path / "derived.xplane.pb"
    path.write_bytes(space.SerializeToString())
    profile = read_path(path)
    assert (profile.events["device"] == "gpu:7").sum() == 25
    assert json.loads(profile.meta["xplane.skipped_lines"]) == {"/device:GPU:7/XLA Ops": 25}
    before = device_breakdown(read_path(JAX06)).set_index("device")["busy_us"]
    after = device_breakdown(profile).set_index("device")["busy_us"]
    assert after.to_dict() == pytest.approx(before.to_dict())


def test_copy_names_by_direction(tmp_path):
    """A host-to-device copy is host I/O, a peer copy exchange: the Chrome rules on Kineto's names."""
    space = _space(JAX06)
    gpu0 = next(p for p in space.planes if p.name == "/device:GPU:0")
    (only,) = list(gpu0.event_metadata.values())
    gpu0.event_metadata[only.id].name = "CopyHostToDevice"
    gpu0.event_metadata[only.id + 1].name = "CopyPeerToPeer"
    gpu0.event_metadata[only.id + 1].id = only.id + 1
    gpu0.lines[0].events[0].metadata_id = only.id + 1
    path = tmp_path / "copies.xplane.pb"
    path.write_bytes(space.SerializeToString())
    events = read_path(path).events
    copies = events[events["device"] == "gpu:0"].groupby(["name", "device_category"], observed=True).size()
    assert copies.to_dict() == {("Memcpy HtoD", "host_io"): 52, ("Memcpy PtoP", "exchange"): 1}


def test_a_plugins_profile_directory_opens(tmp_path, capsys):
    run = tmp_path / "logdir" / "plugins" / "profile" / "2026_12_06_20_00_00"
    run.mkdir(parents=True)
    shutil.copyfile(JAX06, run / "host.xplane.pb")
    assert detect(tmp_path / "logdir").FORMAT == "xplane"
    assert len(read_path(tmp_path / "logdir").events) == len(read_path(JAX06).events)
    assert len(read_path(run).events) == len(read_path(JAX06).events)
    capsys.readouterr()
    assert main(["-q", "summary", str(tmp_path / "logdir")]) == 0
    assert "Profile host (xplane)" in capsys.readouterr().out
    shutil.copyfile(JAX08, run / "other.xplane.pb")
    line = summary_error(tmp_path / "logdir", capsys)
    assert "holds 2 XPlane files" in line and "name one .xplane.pb file" in line


def test_truncated_random_and_empty_files_are_one_line_exit_2(tmp_path, capsys):
    data = JAX08.read_bytes()
    cut = tmp_path / "cut.xplane.pb"
    cut.write_bytes(data[: len(data) // 2])
    assert "not a readable XPlane protobuf" in summary_error(cut, capsys)
    noise = tmp_path / "noise.xplane.pb"
    noise.write_bytes(random.Random(7).randbytes(4096))
    assert "XPlane" in summary_error(noise, capsys)
    text = tmp_path / "text.xplane.pb"
    text.write_text('{"traceEvents": []}\n')
    assert "XPlane" in summary_error(text, capsys)
    empty = tmp_path / "empty.xplane.pb"
    empty.write_bytes(b"")
    assert "empty" in summary_error(empty, capsys)


def test_a_space_without_gpu_or_host_events_is_refused(tmp_path, capsys):
    space = _space(JAX06)
    keep = [p for p in space.planes if p.name in ("/host:metadata", "Task Environment")]
    del space.planes[:]
    space.planes.extend(keep)
    path = tmp_path / "bare.xplane.pb"
    path.write_bytes(space.SerializeToString())
    assert "holds no GPU stream, TPU op or host events" in summary_error(path, capsys)


def test_without_protobuf_one_line_names_the_extra(tmp_path, monkeypatch, capsys):
    proto.xspace_class.cache_clear()
    for name in [m for m in sys.modules if m == "google.protobuf" or m.startswith("google.protobuf.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "google.protobuf", None)  # import google.protobuf raises ImportError
    try:
        with pytest.raises(InputError, match="needs the protobuf library"):
            read_path(JAX06)
        line = summary_error(JAX06, capsys)
        assert "pip install 'popprof[xplane]'" in line
    finally:
        proto.xspace_class.cache_clear()


def test_summary_and_check_on_the_cli(reference, capsys):
    capsys.readouterr()
    assert main(["-q", "summary", str(JAX08), "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["source_format"] == "xplane"
    devices = {d["device"]: d for d in summary["trace"]["devices"]}
    for device, figures in reference["files"][JAX08.name]["devices"].items():
        assert devices[device]["busy_us"] == pytest.approx(figures["busy_us"], abs=NS)
    assert summary["trace"]["top_kernels"][0]["name"] == "input_transpose_fusion.kd"
    main(["-q", "check", str(JAX06), "--format", "json"])
    findings = json.loads(capsys.readouterr().out)["profiles"][0]
    assert "host.device-gaps" in {f["rule_id"] for f in findings["findings"]}
    skipped = {n["rule_id"]: n["reason"] for n in findings["not_evaluated"]}
    assert skipped["exchange.share"].startswith("no communication on the devices")
    main(["-q", "check", str(JAX08), "--format", "json"])
    findings = json.loads(capsys.readouterr().out)["profiles"][0]
    skipped = {n["rule_id"] for n in findings["not_evaluated"]}
    assert not skipped & {"host.device-gaps", "host.launch-overhead", "device.dependency-waits"}


def test_redact_makes_a_bundle_without_the_host_name(tmp_path, capsys):
    out = tmp_path / "shared.popprof"
    assert main(["-q", "redact", str(JAX06), "-o", str(out)]) == 0
    capsys.readouterr()
    blob = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    assert b"vultr" not in blob and b"chi-mi300x" not in blob
    assert len(read_path(out).events) == len(read_path(JAX06).events)
