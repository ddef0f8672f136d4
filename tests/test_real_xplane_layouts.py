"""The XPlane reader on two real layouts (provenance in ``fixtures/real/xplane/README.md``): xprof's
``tpu_inference_2.xplane.pb`` (Apache 2.0), JAX on 4 TPU v6e chips offloading tensors to host memory, and
TraceLens's newer JAX profile of Transformer Engine's fused attention on an MI355X (MIT).

Before, the TPU planes gave metadata only: the summary had host threads and no device at all. Expected values
are read off the files here with the protobuf messages alone (the planes' own lines, events and event metadata),
not with popprof's reading.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import popprof
from popprof.cli import main
from popprof.metrics import devices
from popprof.metrics.collective_sizes import collective_kind
from popprof.readers.xplane import proto
from popprof.trace.device import is_collective

TPU = (
    Path(__file__).resolve().parent.parent
    / "fixtures"
    / "real"
    / "xplane"
    / "xprof_tpu_v6e_inference.xplane.pb"
)


@pytest.fixture(scope="module")
def space():  # noqa: ANN201 - an XSpace message
    """The file's XSpace, parsed with the reader's message classes (no popprof reading)."""
    message = proto.xspace_class()()
    message.ParseFromString(TPU.read_bytes())
    return message


@pytest.fixture(scope="module")
def profile() -> popprof.Profile:
    """popprof's reading of the file."""
    return popprof.open(TPU)


def _ops(plane) -> tuple[list, dict[int, str], dict[int, str]]:  # noqa: ANN001 - an XPlane message
    """A TPU plane's ``XLA Ops`` events, its event names (display name, else name) and HLO categories."""
    stat_names = {k: m.name for k, m in plane.stat_metadata.items()}
    names = {k: m.display_name or m.name for k, m in plane.event_metadata.items()}
    category = {
        k: s.str_value
        for k, m in plane.event_metadata.items()
        for s in m.stats
        if stat_names.get(s.metadata_id) == "hlo_category"
    }
    line = next(line for line in plane.lines if line.name == "XLA Ops")
    return list(line.events), names, category


def _device_ps(plane, event) -> int:  # noqa: ANN001 - an XPlane and an XEvent message
    """An op's duration on the device's own clock (its ``device_duration_ps`` stat), else its own duration."""
    stat_names = {k: m.name for k, m in plane.stat_metadata.items()}
    for stat in event.stats:
        if stat_names.get(stat.metadata_id) == "device_duration_ps":
            return stat.uint64_value or stat.int64_value
    return event.duration_ps


def test_every_tpu_plane_is_a_device_with_its_xla_ops(space, profile):
    """Four ``/device:TPU:N`` planes, each device ``tpu:N`` with exactly its ``XLA Ops`` events (1,504 on TPU 0,
    1,503 on the others) and their summed duration on the device's clock; no ``gpu:N`` device."""
    planes = {p.name: p for p in space.planes if p.name.startswith("/device:TPU:")}
    assert sorted(planes) == [f"/device:TPU:{n}" for n in range(4)]
    events = profile.events
    device = events["device"].astype("string")
    assert sorted(device.dropna().unique()) == ["tpu:0", "tpu:1", "tpu:2", "tpu:3"]
    counts = {}
    for n in range(4):
        ops, _, _ = _ops(planes[f"/device:TPU:{n}"])
        mine = events[device == f"tpu:{n}"]
        counts[n] = len(ops)
        assert len(mine) == len(ops)
        plane = planes[f"/device:TPU:{n}"]
        assert mine["dur_us"].sum() == pytest.approx(sum(_device_ps(plane, e) for e in ops) / 1e6, abs=1e-3)
    assert counts == {0: 1504, 1: 1503, 2: 1503, 3: 1503}


def test_copy_ops_are_copies_and_all_reduce_is_communication(space, profile):
    """Per TPU 600 ``copy-start`` and 600 ``copy-done`` ops (by ``hlo_category``) are copies between host
    memory (XLA's memory space ``S(5)`` in the HLO text) and the device: a ``copy-done`` whose result is in host
    memory is device to host (300 on TPU 0), the others host to device; each ``copy-start`` takes its direction
    from its operand. The 3 ``all-reduce`` ops are communication and the loop fusions (``broadcast_add_fusion``:
    element-wise, not a broadcast collective) compute."""
    events = profile.events
    plane = next(p for p in space.planes if p.name == "/device:TPU:0")
    ops, names, category = _ops(plane)
    by_category = Counter(category.get(e.metadata_id) for e in ops)
    assert by_category == {
        "copy-start": 600,
        "copy-done": 600,
        "loop fusion": 300,
        "all-reduce": 3,
        "broadcast": 1,
    }
    texts = {k: m.name for k, m in plane.event_metadata.items()}
    done_to_host = sum(
        1
        for e in ops
        if category.get(e.metadata_id) == "copy-done"
        and "S(5)" in texts[e.metadata_id].split(" = ", 1)[1].split(" copy-done(")[0]
    )
    start_from_host = sum(
        1
        for e in ops
        if category.get(e.metadata_id) == "copy-start"
        and "S(5)" in texts[e.metadata_id].split(" copy-start(")[1]
    )
    assert (done_to_host, start_from_host) == (300, 300)
    mine = events[events["device"].astype("string") == "tpu:0"]
    assert int((mine["channel"].astype(str) == "gpu_memcpy").sum()) == 1200
    kinds = mine.groupby(mine["device_category"].astype(str))["name"].count().to_dict()
    assert kinds == {"host_io": 1200, "exchange": 3, "compute": 301}
    names_read = mine["name"].astype(str)
    assert int(names_read.str.match(r"Memcpy DtoH \(copy-done").sum()) == done_to_host
    assert int(names_read.str.match(r"Memcpy HtoD \(copy-done").sum()) == 600 - done_to_host
    assert int(names_read.str.match(r"Memcpy HtoD \(copy-start").sum()) == start_from_host
    exchange = set(mine.loc[mine["device_category"].astype(str) == "exchange", "name"].astype(str))
    assert exchange == {"all-reduce"}
    fused = {names[e.metadata_id] for e in ops if category.get(e.metadata_id) == "loop fusion"}
    assert fused == {"broadcast_add_fusion", "broadcast_add_fusion.1", "broadcast_add_fusion.2"}


def test_the_devices_table_counts_copy_done_as_copies(space, profile):
    """The HTA-style table and the time account agree: TPU 0's copies are the ``copy-done`` waits (76.01 s of
    its window, on the device's clock), not compute; the copies table splits them by direction."""
    plane = next(p for p in space.planes if p.name == "/device:TPU:0")
    ops, _, category = _ops(plane)
    copies_s = (
        sum(_device_ps(plane, e) for e in ops if category.get(e.metadata_id, "").startswith("copy")) / 1e12
    )
    assert copies_s == pytest.approx(76.010, abs=1e-3)
    row = devices.device_breakdown(profile).set_index("device").loc["tpu:0"]
    assert row["memory_us"] / 1e6 == pytest.approx(copies_s, abs=1e-3)
    assert row["compute_pct"] < 5 and row["memory_pct"] > 80


def test_idle_breakdown_has_no_negative_share(profile):
    """Zero-length ops written at the picosecond a long ``copy-done`` starts (14 on TPU 0) came after it in
    start order, so the gap before each was minus the copy's length: HTA's kernel wait read -15.8 %."""
    gaps = devices.idle_gaps(profile)
    assert (gaps["gap_us"].dropna() >= -1).all()
    breakdown = devices.idle_breakdown(profile)
    assert (breakdown["idle_us"] >= 0).all()
    assert (breakdown["idle_ratio"].dropna().between(0, 1)).all()


def test_metadata_keeps_the_tpu_type_and_the_lines_left_out(space, profile):
    """``xplane.gpus`` holds each TPU plane's stats (``TPU v6 Lite``); ``XLA Modules``, ``Async XLA Ops`` and
    ``XLA TraceMe`` are counted in ``xplane.skipped_lines``, as the file holds them."""
    gpus = json.loads(profile.meta["xplane.gpus"])
    assert [g["tpu"] for g in gpus] == [0, 1, 2, 3]
    assert {g["device_type_string"] for g in gpus} == {"TPU v6 Lite"}
    skipped = json.loads(profile.meta["xplane.skipped_lines"])
    for plane in space.planes:
        if not plane.name.startswith("/device:TPU:"):
            continue
        for line in plane.lines:
            key = f"{plane.name}/{line.name}"
            if line.name == "XLA Ops" or not len(line.events):
                assert key not in skipped
            else:
                assert skipped[key] == len(line.events)
    assert skipped["/device:TPU:0/Async XLA Ops"] == 600
    labels = profile.threads.set_index("pid")["process_labels"].astype(str).to_dict()
    assert labels[10_000] == "TPU 0" and labels[1_000_000] == "CPU"


def test_hyphenated_hlo_collectives_and_xla_broadcasts():
    """XLA's collectives are named with hyphens; its ``broadcast`` op and broadcast fusions are no collective;
    NCCL's broadcast and Kineto's names keep their reading."""
    assert (
        is_collective("all-reduce")
        and is_collective("all-gather.1")
        and is_collective("collective-permute.3")
    )
    assert is_collective("reduce-scatter") and is_collective("all-to-all.2")
    assert not is_collective("broadcast.2") and not is_collective("broadcast_add_fusion.1")
    assert not is_collective("loop_broadcast_fusion")
    assert is_collective("ncclKernel_Broadcast_RING_LL_Sum_int8_t") and is_collective("broadcast")
    assert not is_collective("void at::native::type_specialized_broadcast_kernel_launcher<...>")
    assert collective_kind("all-reduce") == "all_reduce" and collective_kind("all-gather.1") == "all_gather"
    assert collective_kind("collective-permute") == "send_recv"


@pytest.mark.parametrize(
    "argv",
    [
        ["summary"],
        ["summary", "--format", "json"],
        ["summary", "--critical-path"],
        ["check", "--fail-on", "never"],
    ],
)
def test_every_command_runs(argv, capsys):
    """``summary --critical-path`` failed with an internal error (IndexError: no host call with a correlation
    id to look collective sizes up in); each command now exits 0 and names the TPUs (``check`` finds an error,
    the TPUs waiting on host offloading: ``tests/test_rules_device_copies.py``, so it is asked not to fail)."""
    code = main([*argv, str(TPU)])
    out = capsys.readouterr().out
    assert code == 0
    assert "tpu:0" in out
    if argv == ["summary"]:
        assert "all_reduce" in out and "gpu:" not in out
        # the headings name the TPUs' time, not a GPU's
        assert "  Top kernels (TPU time)" in out and "GPU" not in out
        assert "its first to last TPU work item" in " ".join(out.split())
    if "--format" in argv:
        doc = json.loads(out)
        devices_ = [d["device"] for d in doc["what_limits"]["devices"]]
        assert devices_ == ["tpu:0", "tpu:1", "tpu:2", "tpu:3"]
        assert doc["what_limits"]["devices"][0]["largest"]["part"] == "copies"


def test_tpu_findings_speak_of_jax_and_xla_and_no_host_wait_is_made_up(profile, capsys):
    """A TPU trace is a GPU profile for the rules' figures, but its advice is JAX's and XLA's: the long host
    events (its MapDmaBuffer and np.asarray(jax.Array) among them) get the TPU text, never CUDA's or
    PyTorch's; and no TPU runtime call is known to block, so "host blocked" is not measured (null), not 0 %."""
    from popprof.rules import RULES, check
    from popprof.rules.platform import advice_platform, platform_of

    assert (platform_of(profile), advice_platform(profile)) == ("gpu", "tpu")
    found = {f.rule_id: f for f in check(profile)}
    assert "host.long-events" in found
    for f in found.values():
        assert f.advice == RULES[f.rule_id].advice_for("tpu"), f.rule_id
        for cuda_word in ("CUDA", "pin_memory", "non_blocking", "NCCL", "DDP"):
            assert cuda_word not in f.advice, (f.rule_id, cuda_word)
    assert "MapDmaBuffer" in found["host.long-events"].message
    assert "TPU_PREMAPPED_BUFFER_SIZE" in found["host.long-events"].advice
    table = devices.device_breakdown(profile)
    assert table["host_wait_pct"].isna().all() and table["host_wait_us"].isna().all()
    assert main(["summary", str(TPU)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "on a TPU its XLA collectives" in out and "NCCL/RCCL kernels" not in out
    assert "not measured on a TPU" in out and "cudaDeviceSynchronize" not in out


def test_report_and_timeline(tmp_path, capsys):
    """The HTML report and the timeline write their files from it."""
    assert main(["report", str(TPU), "-o", str(tmp_path / "r.html")]) == 0
    assert "tpu:0" in (tmp_path / "r.html").read_text("utf-8")
    assert main(["timeline", str(TPU), "-o", str(tmp_path / "t.json")]) == 0
    trace = json.loads((tmp_path / "t.json").read_text("utf-8"))
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    assert np.sum([1 for e in events if e.get("ph") == "X"]) > 6000
    capsys.readouterr()


TE = TPU.parent / "tracelens_te_fused_attn_mi355x.xplane.pb"


def _correlations(plane, line) -> list[int | None]:  # noqa: ANN001 - XPlane and XLine messages
    """Each event's ``correlation_id`` stat (None where it has none)."""
    stat_names = {k: m.name for k, m in plane.stat_metadata.items()}
    out = []
    for event in line.events:
        found = [
            s.uint64_value or s.int64_value
            for s in event.stats
            if stat_names.get(s.metadata_id) == "correlation_id"
        ]
        out.append(found[0] if found else None)
    return out


def test_te_fused_attention_on_an_mi355x():
    """TraceLens's newer JAX profile (Transformer Engine's fused attention, ``gfx950``): GPU 0's one stream of
    150 kernels (12.134 ms) is ``gpu:0``; planes 1-7 and the ``/device:CUSTOM:Megascale Trace`` plane have no
    lines; each kernel's launch call (on ``Host Threads/7``) joins it by correlation id: 150 launch delays."""
    message = proto.xspace_class()()
    message.ParseFromString(TE.read_bytes())
    gpu = next(p for p in message.planes if p.name == "/device:GPU:0")
    (stream,) = [line for line in gpu.lines if len(line.events)]
    assert stream.name == "Stream #2" and len(stream.events) == 150
    host = next(p for p in message.planes if p.name == "/host:CPU")
    launches = {c for line in host.lines for c in _correlations(host, line) if c is not None}
    kernels = _correlations(gpu, stream)
    assert len(kernels) == 150 and set(kernels) <= launches
    assert any(p.name == "/device:CUSTOM:Megascale Trace" and not len(p.lines) for p in message.planes)

    profile = popprof.open(TE)
    events = profile.events
    device = events["device"].astype("string")
    assert list(device.dropna().unique()) == ["gpu:0"]
    mine = events[device == "gpu:0"]
    assert len(mine) == 150 and set(mine["stream"].astype(int)) == {2}
    assert mine["dur_us"].sum() == pytest.approx(sum(e.duration_ps for e in stream.events) / 1e6, abs=1e-3)
    assert mine["dur_us"].sum() == pytest.approx(12_133.585, abs=1e-3)
    assert len(devices.launch_delays(profile)) == 150
    gpus = json.loads(profile.meta["xplane.gpus"])
    assert gpus[0]["gpu"] == 0 and gpus[0]["compute_cap_major"] == 9 and gpus[0]["core_count"] == 256
    assert "xplane.skipped_lines" not in profile.meta  # no derived line, no other plane with events


def test_te_summary_names_no_pytorch_sync_note(capsys):
    """The critical path's note about Kineto's ``cuda_sync`` events (pytorch/pytorch#105187) is for PyTorch
    traces: an XPlane cannot hold them, so the summary made a PyTorch remark on a JAX profile."""
    assert main(["summary", str(TE), "--critical-path"]) == 0
    out = capsys.readouterr().out
    assert "Critical path" in out and "gpu:0" in out
    assert "105187" not in out and "CUDA sync" not in out


def test_the_pilot_calls_a_tpu_baseline_tpu(capsys):
    """An IPU run beside this TPU profile: the baseline's column is headed TPU (its figures are a ``gpu``
    platform's), in the text and the JSON (``device_kind``); a GPU trace's stays GPU."""
    ipu = TPU.parent.parent.parent / "mk2_training.popprof"
    gpu = TPU.parent.parent / "traces" / "hta_simple_add.json.gz"
    assert main(["pilot", str(ipu), "--baseline", str(TPU), "--format", "json"]) == 0
    columns = json.loads(capsys.readouterr().out)["columns"]
    assert [(c["platform"], c["device_kind"]) for c in columns] == [("ipu", "IPU"), ("gpu", "TPU")]
    assert main(["pilot", str(ipu), "--baseline", str(TPU)]) == 0
    assert f"{TPU.name} (TPU)" in capsys.readouterr().out
    assert main(["pilot", str(ipu), "--baseline", str(gpu)]) == 0
    assert f"{gpu.name} (GPU)" in capsys.readouterr().out


def test_each_async_copy_span_is_one_transfer(space, profile):
    """TPU 0's ``Async XLA Ops`` line (which popprof does not read; TPUs 1-3 have it empty) holds one
    ``async-copy`` span per asynchronous copy in flight, from its copy-start to its copy-done: as many per
    direction (from the span's HLO text, a ``copy-start``: host to device when its operand is in host memory,
    ``S(5)``) as the transfers ``metrics.copies`` counts from the ``XLA Ops`` line's copy-start/copy-done
    pairs, half its ops."""
    from popprof.metrics.copies import copy_records

    counted = {(r["device"], r["direction"]): (r["count"], r["ops"]) for r in copy_records(profile)}
    plane = next(p for p in space.planes if p.name == "/device:TPU:0")
    line = next(line for line in plane.lines if line.name == "Async XLA Ops")
    assert {plane.event_metadata[e.metadata_id].display_name for e in line.events} == {"async-copy"}
    texts = [plane.event_metadata[e.metadata_id].name for e in line.events]
    spans = Counter("HtoD" if "S(5)" in t.split(" copy-start(", 1)[1] else "DtoH" for t in texts)
    assert sum(spans.values()) == len(line.events) == 600
    for direction, n in spans.items():
        assert counted[("tpu:0", direction)] == (n, 2 * n)


def test_each_copy_done_record_names_the_copy_start_it_waits_for(space, profile):
    """The reader's op record of each ``copy-done`` (``xplane.tpu_ops``) names, as ``copy_start``, the
    ``copy-start`` its HLO text takes as operand (the text's last ``%`` name here); no other op has one."""
    records = json.loads(profile.meta["xplane.tpu_ops"])
    for plane in space.planes:
        if not plane.name.startswith("/device:TPU:"):
            continue
        device = "tpu:" + plane.name.rsplit(":", 1)[1]
        ops, names, category = _ops(plane)
        expected = {
            names[e.metadata_id]: plane.event_metadata[e.metadata_id].name.rsplit("%", 1)[1].rstrip(")")
            for e in ops
            if category.get(e.metadata_id) == "copy-done"
        }
        assert len(expected) == 6 and all(v.startswith("copy-start") for v in expected.values())
        mine = {r["name"]: r.get("copy_start") for r in records if r["device"] == device}
        assert {n: s for n, s in mine.items() if s is not None} == expected
