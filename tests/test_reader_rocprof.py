"""The rocprofiler-sdk JSON reader (``popprof.readers.rocprof``) on a real rocprofv3 file, checked three ways.

``fixtures/real/traces/rocprofv3_mi350_train.json.gz`` is AMD TraceLens's test file ``tests/rocprof/
908_results.json.gz`` (a 50-step training run on an MI350X node, kernel trace only; provenance in the README
there). The tests compare popprof's reading with:

- the file's own records, counted here straight from the JSON (kernels per queue, the first dispatch's times);
- AMD TraceLens's rocprofv3 report (``tracelens_rocprof_reference.json``, written by
  ``make_tracelens_rocprof.py`` from TraceLens commit 171dd747): its kernel summary (per kernel name the count
  and the summed duration) and its GPU timeline's busy time (the union of the kernels' intervals). Counts must
  be equal and times within 0.1 %. TraceLens names kernels by their symbol's ``truncated_kernel_name``; popprof
  by the demangled name, mapped here through the file's ``kernel_symbols`` (matched on ``kernel_id``).

Host calls and copies, absent from the real file, are checked on the real file with records added in the
layout rocprofiler-sdk writes (its ``strings`` tables give the operation numbers), and bad input on copies of
the real file cut or damaged in ``tmp_path``.
"""

from __future__ import annotations

import collections
import gzip
import json
from pathlib import Path

import numpy as np
import orjson
import pytest
from cli_helpers import summary_error

from popprof.cli import main
from popprof.metrics.devices import device_breakdown, launch_delays, top_kernels
from popprof.model.errors import InputError
from popprof.readers import detect, read_path

TRACES = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
TRACE = TRACES / "rocprofv3_mi350_train.json.gz"
REFERENCE = TRACES / "tracelens_rocprof_reference.json"
KERNELS = 43_915


@pytest.fixture(scope="module")
def tool() -> dict:
    """The file's tool section, parsed here without popprof."""
    return orjson.loads(gzip.decompress(TRACE.read_bytes()))["rocprofiler-sdk-tool"][0]


@pytest.fixture(scope="module")
def profile():
    return read_path(TRACE)


@pytest.fixture(scope="module")
def reference() -> dict:
    return json.loads(REFERENCE.read_text())


def _write(path: Path, tool: dict) -> Path:
    path.write_bytes(orjson.dumps({"rocprofiler-sdk-tool": [tool]}))
    return path


def _copy(tool: dict) -> dict:
    return orjson.loads(orjson.dumps(tool))


def test_detected_gzipped_and_plain(tmp_path):
    plain = tmp_path / "908_results.json"
    plain.write_bytes(gzip.decompress(TRACE.read_bytes()))
    assert detect(TRACE).FORMAT == "rocprof"
    assert detect(plain).FORMAT == "rocprof"


def test_every_dispatch_is_a_kernel_on_its_gpu_queue(profile, tool):
    events = profile.events
    assert profile.source_format == "rocprof"
    assert len(events) == KERNELS
    assert set(events["channel"].astype(str)) == {"kernel"}
    assert set(events["device"].astype(str)) == {"gpu:0"}  # one of the node's 8 GPUs ran this process
    assert events["stream"].notna().all() and events["correlation"].notna().all()
    counted = collections.Counter(
        r["dispatch_info"]["queue_id"]["handle"] for r in tool["buffer_records"]["kernel_dispatch"]
    )
    assert dict(events.groupby("tid").size()) == dict(counted)
    assert sorted(counted) == [16, 17, 18, 19, 20]
    assert (events["tid"] == events["stream"].astype("int64")).all()  # one track per (GPU, queue)
    assert (events["pid"] == 0).all()


def test_the_gpu_is_named_from_the_agents_list(profile):
    threads = profile.threads
    assert set(threads["process_name"]) == {"AMD Instinct MI350X (gfx950)"}
    assert sorted(threads["thread_name"]) == [f"queue {q}" for q in (16, 17, 18, 19, 20)]
    assert set(threads["process_labels"]) == {"GPU 0"}
    gpus = json.loads(profile.meta["rocprof.gpus"])
    assert [g["gpu"] for g in gpus] == list(range(8))  # the 8 GPU agents of the 10 (2 are CPUs)


def test_times_are_the_records_nanoseconds_in_microseconds(profile, tool):
    first = tool["buffer_records"]["kernel_dispatch"][0]
    row = profile.events.loc[profile.events["correlation"] == first["correlation_id"]["internal"]].iloc[0]
    assert row["start_us"] == first["start_timestamp"] / 1000
    assert row["dur_us"] == pytest.approx(
        (first["end_timestamp"] - first["start_timestamp"]) / 1000, abs=1e-9
    )
    assert row["name"] == tool["kernel_symbols"][first["dispatch_info"]["kernel_id"]]["formatted_kernel_name"]


def test_busy_time_matches_tracelens(profile, reference):
    """TraceLens's busy time: the union of every kernel's interval (its GPU timeline, in ms)."""
    row = device_breakdown(profile).set_index("device").loc["gpu:0"]
    assert row["work_items"] == KERNELS
    assert row["streams"] == 5
    assert row["busy_us"] / 1000 == pytest.approx(reference["gpu_timeline_ms"]["busy_time"], rel=1e-3)
    assert row["communication_us"] / 1000 == pytest.approx(4158.757, rel=1e-5)  # the RCCL kernels' union


def test_kernel_totals_match_tracelens(profile, tool, reference):
    """Per TraceLens kernel name: the same dispatch count, and the summed duration within 0.1 %."""
    stats = top_kernels(profile, top=10_000)
    truncated = {}
    for symbol in tool["kernel_symbols"]:
        truncated.setdefault(symbol["formatted_kernel_name"], set()).add(symbol["truncated_kernel_name"])
    assert all(len(v) == 1 for v in truncated.values())  # the mapping is a function
    stats["tracelens"] = [next(iter(truncated[n])) for n in stats["name"]]
    ours = stats.groupby("tracelens")[["count", "total_us"]].sum()
    theirs = reference["kernels"]
    assert sorted(ours.index) == sorted(theirs)
    assert int(ours["count"].sum()) == reference["kernel_count"] == KERNELS
    for name, row in ours.iterrows():
        assert row["count"] == theirs[name]["count"], name
        assert row["total_us"] == pytest.approx(theirs[name]["total_time_us"], rel=1e-3), name
    assert stats["total_us"].sum() == pytest.approx(reference["total_kernel_time_us"], rel=1e-3)


def test_top_kernels(profile):
    top = top_kernels(profile, top=3)
    assert top["name"].iloc[0] == "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)"
    assert top["kernel_type"].iloc[0] == "COMMUNICATION"
    assert top["count"].tolist()[0] == 1_310
    assert top["total_us"].iloc[0] == pytest.approx(4_158_756.678, rel=1e-6)
    assert (
        top["name"]
        .iloc[1]
        .startswith("void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy")
    )
    assert top["count"].iloc[1] == 5_450


def _with_host_records(tool: dict) -> dict:
    """The real file with a HIP launch call before its first two dispatches, a marker, and a copy to the GPU,
    in rocprofiler-sdk's record layout; operation numbers from the file's own ``strings`` tables."""
    tool = _copy(tool)
    kinds = [entry["kind"] for entry in tool["strings"]["buffer_records"]]
    hip, marker, copy = (kinds.index(k) for k in ("HIP_RUNTIME_API", "MARKER_CORE_API", "MEMORY_COPY"))
    ops = tool["strings"]["buffer_records"]
    launch = ops[hip]["operations"].index("hipLaunchKernel")
    sync = ops[hip]["operations"].index("hipDeviceSynchronize")
    push = ops[marker]["operations"].index("roctxRangePushA")
    to_device = ops[copy]["operations"].index("MEMORY_COPY_HOST_TO_DEVICE")
    records = tool["buffer_records"]
    first, second = records["kernel_dispatch"][:2]
    thread = first["thread_id"]

    def call(kind: int, op: int, corr: int, start: int, end: int) -> dict:
        return {
            "size": 56,
            "kind": kind,
            "operation": op,
            "correlation_id": {"internal": corr, "external": 0},
            "start_timestamp": start,
            "end_timestamp": end,
            "thread_id": thread,
        }

    t0 = first["start_timestamp"]
    records["hip_api"] = [
        call(hip, launch, first["correlation_id"]["internal"], t0 - 9_000, t0 - 4_000),
        call(hip, launch, second["correlation_id"]["internal"], t0 - 3_000, t0 - 1_000),
        call(hip, sync, 10**9, second["end_timestamp"] + 100, second["end_timestamp"] + 50_000),
    ]
    records["marker_api"] = [call(marker, push, 10**9 + 1, t0 - 20_000, second["end_timestamp"] + 60_000)]
    tool["strings"]["marker_api"] = [{"key": 10**9 + 1, "value": "train_step"}]
    gpu = first["dispatch_info"]["agent_id"]["handle"]
    cpu = next(a["id"]["handle"] for a in tool["agents"] if a["type"] == 1)
    records["memory_copy"] = [
        {
            **call(copy, to_device, 10**9 + 2, t0 - 30_000, t0 - 25_000),
            "dst_agent_id": {"handle": gpu},
            "src_agent_id": {"handle": cpu},
            "bytes": 1 << 20,
        }
    ]
    return tool


def test_host_calls_copies_and_their_launch_join(tmp_path, tool):
    profile = read_path(_write(tmp_path / "with_api.json", _with_host_records(tool)))
    events = profile.events
    assert len(events) == KERNELS + 3 + 1 + 1
    host = events[events["device"].isna()]
    assert sorted(host["channel"].astype(str)) == ["hip_api"] * 3 + ["marker_api"]
    assert set(host["pid"]) == {908} and set(host["tid"]) == {908}  # the process's pid, the call's thread
    assert host["stream"].isna().all()
    by_name = dict(zip(host["name"].astype(str), host["device_category"].astype(str), strict=False))
    assert by_name["hipDeviceSynchronize"] == "host_wait"
    assert "train_step" in by_name  # a marker is named by its message
    copy = events[events["channel"] == "gpu_memcpy"].iloc[0]
    assert (copy["name"], copy["device"], copy["device_category"]) == ("Memcpy HtoD", "gpu:0", "host_io")
    assert copy["tid"] == 21  # its own track after the queues (16..20)
    assert copy["tid"] not in set(events.loc[events["channel"] == "kernel", "tid"])
    assert "copies" in set(profile.threads["thread_name"])
    delays = launch_delays(profile)  # the launch calls joined to their kernels by correlation id
    assert len(delays) == 2
    # HTA's launch delay: work start (rounded up to a whole us, as HTA does) - call end; the second kernel
    # starts 83.64 us after the first, its call ended 1 us before the first
    assert sorted(delays["launch_delay_us"].round(3)) == [4.0, 85.0]


def test_a_copy_between_two_gpus_is_peer_to_peer(tmp_path, tool):
    damaged = _with_host_records(tool)
    gpus = [a["id"]["handle"] for a in damaged["agents"] if a["type"] == 2]
    kinds = [entry["kind"] for entry in damaged["strings"]["buffer_records"]]
    ops = damaged["strings"]["buffer_records"][kinds.index("MEMORY_COPY")]["operations"]
    record = damaged["buffer_records"]["memory_copy"][0]
    record.update(operation=ops.index("MEMORY_COPY_DEVICE_TO_DEVICE"), src_agent_id={"handle": gpus[1]})
    events = read_path(_write(tmp_path / "peer.json", damaged)).events
    copy = events[events["channel"] == "gpu_memcpy"].iloc[0]
    assert (copy["name"], copy["device"], copy["device_category"]) == ("Memcpy PtoP", "gpu:1", "exchange")


def test_a_truncated_file_is_one_line_exit_2(tmp_path, capsys):
    raw = gzip.decompress(TRACE.read_bytes())
    cut = tmp_path / "cut.json"
    cut.write_bytes(raw[: len(raw) // 2])
    assert "truncated JSON: the file ends inside its JSON value" in summary_error(cut, capsys)
    gz = tmp_path / "cut.json.gz"
    data = TRACE.read_bytes()
    gz.write_bytes(data[: len(data) // 2])
    assert "truncated" in summary_error(gz, capsys)


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (
            lambda r: r["buffer_records"]["kernel_dispatch"][7].pop("end_timestamp"),
            "kernel_dispatch[7] has no end_timestamp",
        ),
        (
            lambda r: r["buffer_records"]["kernel_dispatch"][3].update(start_timestamp="soon"),
            "kernel_dispatch[3].start_timestamp",
        ),
        (
            lambda r: r["buffer_records"]["kernel_dispatch"][5]["dispatch_info"].pop("queue_id"),
            "kernel_dispatch[5] has no dispatch_info.queue_id",
        ),
        (
            lambda r: r["buffer_records"]["kernel_dispatch"][0]["dispatch_info"]["agent_id"].update(
                handle=37944
            ),
            "which is not a GPU",
        ),
        (lambda r: r["buffer_records"].update(kernel_dispatch=[]), "holds no kernel dispatches"),
        (lambda r: r.update(buffer_records=[]), "buffer_records' is a list, not an object"),
    ],
)
def test_damaged_records_are_named_in_one_line(tmp_path, tool, damage, said, capsys):
    damaged = _copy(tool)
    damage(damaged)
    line = summary_error(_write(tmp_path / "damaged.json", damaged), capsys)
    assert said in line
    with pytest.raises(InputError):
        read_path(tmp_path / "damaged.json")


def test_not_one_process(tmp_path, tool, capsys):
    path = tmp_path / "two.json"
    path.write_bytes(orjson.dumps({"rocprofiler-sdk-tool": [tool, tool]}))
    assert "holds 2 processes" in summary_error(path, capsys)
    path.write_bytes(b'{"rocprofiler-sdk-tool": []}')
    assert "is empty" in summary_error(path, capsys)


def test_an_end_before_its_start_keeps_the_event_without_a_duration(tmp_path, tool):
    damaged = _copy(tool)
    record = damaged["buffer_records"]["kernel_dispatch"][0]
    record["end_timestamp"] = record["start_timestamp"] - 10
    profile = read_path(_write(tmp_path / "backwards.json", damaged))
    assert len(profile.events) == KERNELS
    assert int(np.isnan(profile.events["dur_us"]).sum()) == 1
    assert int(profile.meta["warnings.end_before_start"]) == 1


def test_a_bundle_keeps_the_figures_and_the_device_map(tmp_path, profile, capsys):
    """Exported to a bundle and read back: the same device figures; a device map given when reading the bundle
    re-classifies with the rocprof defaults behind it, as reading the file with that map does."""
    bundle = tmp_path / "run.popprof"
    assert main(["-q", "export", str(TRACE), "-o", str(bundle)]) == 0
    capsys.readouterr()
    back = read_path(bundle)
    assert back.source_format == "rocprof"
    columns = ["device", "busy_us", "communication_us", "work_items", "streams"]
    assert device_breakdown(back)[columns].equals(device_breakdown(profile)[columns])
    mapping = {"other": r"^kernel:__amd_rocclr_"}
    from_file = read_path(TRACE, device_map=mapping).events
    from_bundle = read_path(bundle, device_map=mapping).events
    for events in (from_file, from_bundle):
        counts = events["device_category"].astype(str).value_counts().to_dict()
        # the runtime's fill and copy kernels (3,213 + 3,153) mapped to other; RCCL's stay communication
        assert counts == {"compute": KERNELS - 1_310 - 6_366, "exchange": 1_310, "other": 6_366}


def test_a_directory_of_one_file_per_process_is_one_run(tmp_path, tool, capsys):
    """rocprofv3 under a launcher writes ``<pid>_results.json`` per process, with no rank: the directory opens as
    one run, ranks given in the names' natural order (pid 9 before pid 10) and said; two files of one process
    (same pid and start) and a directory mixing rocprof and Chrome traces are refused in one line, exit 2."""
    import shutil

    import popprof

    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(TRACE, run / "10_results.json.gz")  # the real file, bytes unchanged
    other = _copy(tool)
    other["metadata"]["pid"] += 1
    other["metadata"]["init_time"] += 1_000
    _write(run / "9_results.json", other)  # the same process's records under a second pid
    profile = popprof.open(run)
    assert profile.meta["source_format"] == "rocprof"
    assert json.loads(profile.meta["trace.rank_files"]) == {"0": "9_results.json", "1": "10_results.json.gz"}
    assert int(profile.meta["warnings.rank_given"]) == 2
    events = profile.events
    kernels = events[events["channel"] == "kernel"]
    assert kernels.groupby("rank").size().to_dict() == {0: KERNELS, 1: KERNELS}
    busy = device_breakdown(profile).set_index("rank")["busy_us"]
    assert busy[0] == pytest.approx(busy[1]) and busy[0] == pytest.approx(
        device_breakdown(read_path(TRACE))["busy_us"].iloc[0]
    )

    twin = tmp_path / "twin"
    twin.mkdir()
    shutil.copy(TRACE, twin / "908_results.json.gz")
    shutil.copy(TRACE, twin / "909_results.json.gz")
    assert main(["summary", str(twin), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "one process's trace (pid 908" in err[0]

    mixed = tmp_path / "mixed"
    mixed.mkdir()
    shutil.copy(TRACES / "tracelens_h100_bert_small.json.gz", mixed / "rank-0.json.gz")
    shutil.copy(TRACE, mixed / "908_results.json.gz")
    assert main(["summary", str(mixed), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Chrome traces and rocprofv3 files" in err[0]
