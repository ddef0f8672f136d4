"""Synthetic Chrome traces shaped like a PyTorch-profiler (kineto) training loop.

Used by ``fixtures/make_traces.py`` (small sample traces) and by the benchmarks
(traces of 10 MB to 1 GB). Deterministic for a given seed. Every training step
has, on the host, a ``ProfilerStep#N`` annotation with a data-loader wait,
forward ops launching kernels, a backward pass on the autograd thread, an NCCL
all-reduce, an optimizer step, a memset and a loss read-back that synchronises;
on the GPU, kernels (compute stream 7), NCCL kernels (stream 20), memcpy HtoD /
DtoH and memset. Some steps wait long for data, which shows up as device-idle
gaps (host stalls). GPU memory is recorded as a counter (``ph: C``).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import random
from collections.abc import Iterator
from pathlib import Path

HOST_PID = 4242
MAIN_TID = 4242
BWD_TID = 4250
LOADER_TID = 4260
GPU_PID = 0
COMPUTE_STREAM = 7
NCCL_STREAM = 20
BASE_TS = 5_000_000_000.0  # us; kineto timestamps are large, like this

_LAYERS = ("linear1", "linear2", "linear3", "linear4")
_GEMM = "ampere_sgemm_128x64_tn"
_ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"
_RELU = "void at::native::vectorized_elementwise_kernel<4, at::native::clamp_min_scalar_kernel>"
_NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
_ADAM = "void at::native::multi_tensor_apply_kernel<at::native::FusedOptimizerTensorListMetadata>"
#: CUPTI callback ids kineto writes as ``cbid`` on runtime calls
_CBID = {"cudaLaunchKernel": 211, "cudaMemcpyAsync": 41, "cudaMemsetAsync": 51}


def _fmt(value: float) -> str:
    return f"{value:.3f}"


class _Writer:
    """Collects events of one step as JSON text (no dicts: fast enough for 10M events)."""

    def __init__(self, args: str, correlation: int = 0, flow_id: int = 0) -> None:
        self.args = args  # "kineto" | "all" | "gpu" | "none"
        self.kineto = args == "kineto"  # args on every event like kineto's, plus ac2g / fwdbwd flow events
        self.parts: list[str] = []
        self.count = 0
        self.correlation = correlation  # the last correlation id used: ids are unique over the whole trace
        self.flow_id = flow_id  # the last fwdbwd flow id used (unique over the whole trace)
        self.external = 0  # kineto's "External id" of host ops (per step; small numbers like kineto's)

    def x(self, cat: str, name: str, pid: int, tid: int, ts: float, dur: float, args: str = "") -> None:
        text = (
            f'{{"ph":"X","cat":"{cat}","name":"{name}","pid":{pid},"tid":{tid},'
            f'"ts":{_fmt(ts)},"dur":{_fmt(dur)}'
        )
        if self.kineto and pid == HOST_PID and cat != "cuda_runtime":
            self.external += 1
            args = f'"External id":{self.external}' + (f",{args}" if args else "")
        if args and (self.args in ("all", "kineto") or (self.args == "gpu" and pid == GPU_PID)):
            text += f',"args":{{{args}}}'
        self.parts.append(text + "}")
        self.count += 1

    def raw(self, text: str) -> None:
        self.parts.append(text)
        self.count += 1

    def launch(
        self,
        tid: int,
        ts: float,
        cat: str,
        name: str,
        gpu_ts: float,
        gpu_dur: float,
        stream: int = COMPUTE_STREAM,
        runtime: str = "cudaLaunchKernel",
    ) -> float:
        """A runtime call on the host that starts a GPU event; returns the host call's end."""
        self.correlation += 1
        c = self.correlation
        if (
            self.kineto
        ):  # as kineto writes them: ids on both sides and an ac2g flow from the call to the kernel
            self.x(
                "cuda_runtime",
                runtime,
                HOST_PID,
                tid,
                ts,
                4.0,
                f'"External id":{c},"cbid":{_CBID[runtime]},"correlation":{c}',
            )
            self.raw(
                f'{{"ph":"s","id":{c},"pid":{HOST_PID},"tid":{tid},"ts":{_fmt(ts)},'
                f'"cat":"ac2g","name":"ac2g"}}'
            )
            self.x(
                cat,
                name,
                GPU_PID,
                stream,
                gpu_ts,
                gpu_dur,
                f'"External id":{c},"device":0,"context":1,"stream":{stream},"correlation":{c}',
            )
            self.raw(
                f'{{"ph":"f","id":{c},"pid":{GPU_PID},"tid":{stream},"ts":{_fmt(gpu_ts)},'
                f'"cat":"ac2g","name":"ac2g","bp":"e"}}'
            )
        else:
            self.x("cuda_runtime", runtime, HOST_PID, tid, ts, 4.0, f'"correlation":{c}')
            self.x(
                cat, name, GPU_PID, stream, gpu_ts, gpu_dur, f'"device":0,"stream":{stream},"correlation":{c}'
            )
        return ts + 4.0

    def fwdbwd(self, ph: str, flow: int, tid: int, ts: float) -> None:
        """Kineto's flow from a forward op to the backward op that autograd runs for it."""
        if self.kineto:
            end = ',"bp":"e"' if ph == "f" else ""
            self.raw(
                f'{{"ph":"{ph}","id":{flow},"pid":{HOST_PID},"tid":{tid},"ts":{_fmt(ts)},'
                f'"cat":"fwdbwd","name":"fwdbwd"{end}}}'
            )


def _layer_names(layers: int) -> tuple[str, ...]:
    return _LAYERS if layers == len(_LAYERS) else tuple(f"linear{i + 1}" for i in range(layers))


def _step(w: _Writer, step: int, t: float, rng: random.Random, layers: int = len(_LAYERS)) -> float:
    """Write one training step (``layers`` linear layers) starting at host time ``t``.

    Returns the host time at which the next step may start.
    """
    names = _layer_names(layers)
    w.external = 0
    stall = rng.random() < 0.1
    load = rng.uniform(1500.0, 3000.0) if stall else rng.uniform(40.0, 120.0)
    step_start = t
    events_before = len(w.parts)
    w.parts.append("")  # placeholder for ProfilerStep (its duration is known at the end)
    w.count += 1
    w.x(
        "user_annotation",
        "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
        HOST_PID,
        MAIN_TID,
        t + 2.0,
        load,
    )
    w.x("user_annotation", "DataLoader.fetch", HOST_PID, LOADER_TID, t + 1.0, load - 2.0)
    t += load + 4.0
    gpu = t + 10.0  # the GPU is idle until the first copy arrives
    # input to device
    w.x("cpu_op", "aten::to", HOST_PID, MAIN_TID, t, 30.0)
    w.x("cpu_op", "aten::copy_", HOST_PID, MAIN_TID, t + 2.0, 26.0)
    w.launch(
        MAIN_TID,
        t + 4.0,
        "gpu_memcpy",
        "Memcpy HtoD (Pageable -> Device)",
        gpu,
        55.0,
        runtime="cudaMemcpyAsync",
    )
    gpu += 57.0
    t += 34.0
    # forward
    flows = []
    for layer in names:
        w.x("cpu_op", "aten::linear", HOST_PID, MAIN_TID, t, 40.0, f'"layer":"{layer}"')
        w.x("cpu_op", "aten::addmm", HOST_PID, MAIN_TID, t + 3.0, 30.0)
        if w.kineto:
            w.flow_id += 1
            flows.append(w.flow_id)
            w.fwdbwd("s", w.flow_id, MAIN_TID, t + 3.0)
        dur = rng.uniform(80.0, 120.0)
        w.launch(MAIN_TID, t + 8.0, "kernel", _GEMM, max(gpu, t + 14.0), dur)
        gpu = max(gpu, t + 14.0) + dur + 2.0
        w.x("cpu_op", "aten::relu", HOST_PID, MAIN_TID, t + 42.0, 14.0)
        w.launch(MAIN_TID, t + 45.0, "kernel", _RELU, gpu, 9.0)
        gpu += 11.0
        t += 60.0
    # backward on the autograd thread
    bt = t + 5.0
    for layer in reversed(names):
        w.x("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", HOST_PID, BWD_TID, bt, 70.0)
        if flows:
            w.fwdbwd("f", flows.pop(), BWD_TID, bt)
        w.x("cpu_op", "AddmmBackward0", HOST_PID, BWD_TID, bt + 2.0, 64.0, f'"layer":"{layer}"')
        w.x("cpu_op", "aten::mm", HOST_PID, BWD_TID, bt + 4.0, 25.0)
        dur = rng.uniform(90.0, 140.0)
        w.launch(BWD_TID, bt + 8.0, "kernel", _GEMM, max(gpu, bt + 14.0), dur)
        gpu = max(gpu, bt + 14.0) + dur + 2.0
        w.x("cpu_op", "aten::mm", HOST_PID, BWD_TID, bt + 32.0, 25.0)
        dur = rng.uniform(90.0, 140.0)
        w.launch(BWD_TID, bt + 36.0, "kernel", _GEMM, gpu, dur)
        gpu += dur + 2.0
        bt += 75.0
    # gradient all-reduce (NCCL) on its own stream
    w.x("cpu_op", "nccl:all_reduce", HOST_PID, BWD_TID, bt, 20.0)
    dur = rng.uniform(300.0, 500.0)
    w.launch(BWD_TID, bt + 5.0, "kernel", _NCCL, gpu, dur, stream=NCCL_STREAM)
    gpu += dur + 3.0
    t = max(t, bt + 25.0) + 5.0
    # optimizer
    w.x("user_annotation", "Optimizer.step#Adam.step", HOST_PID, MAIN_TID, t, 60.0)
    w.x("cpu_op", "aten::_foreach_add_", HOST_PID, MAIN_TID, t + 5.0, 30.0)
    w.launch(MAIN_TID, t + 10.0, "kernel", _ADAM, max(gpu, t + 16.0), 45.0)
    gpu = max(gpu, t + 16.0) + 47.0
    w.x("cpu_op", "aten::add_", HOST_PID, MAIN_TID, t + 40.0, 15.0)
    w.launch(MAIN_TID, t + 42.0, "kernel", _ELEMENTWISE, gpu, 6.0)
    gpu += 8.0
    t += 65.0
    # zero_grad
    w.x("cpu_op", "aten::zero_", HOST_PID, MAIN_TID, t, 14.0)
    w.x("cpu_op", "aten::fill_", HOST_PID, MAIN_TID, t + 2.0, 10.0)
    w.launch(MAIN_TID, t + 4.0, "gpu_memset", "Memset (Device)", gpu, 3.0, runtime="cudaMemsetAsync")
    gpu += 4.0
    t += 16.0
    # loss.item(): copy back and wait for the GPU
    w.x("cpu_op", "aten::item", HOST_PID, MAIN_TID, t, 0.0)  # replaced below once the wait is known
    item_index = len(w.parts) - 1
    w.x("cpu_op", "aten::_local_scalar_dense", HOST_PID, MAIN_TID, t + 1.0, 0.0)
    dense_index = len(w.parts) - 1
    w.launch(
        MAIN_TID,
        t + 3.0,
        "gpu_memcpy",
        "Memcpy DtoH (Device -> Pageable)",
        max(gpu, t + 9.0),
        3.0,
        runtime="cudaMemcpyAsync",
    )
    gpu = max(gpu, t + 9.0) + 3.0
    sync_start = t + 8.0
    sync_end = max(gpu + 2.0, sync_start + 1.0)
    w.x("cuda_runtime", "cudaStreamSynchronize", HOST_PID, MAIN_TID, sync_start, sync_end - sync_start)
    end = sync_end + 2.0
    w.parts[item_index] = (
        f'{{"ph":"X","cat":"cpu_op","name":"aten::item","pid":{HOST_PID},"tid":{MAIN_TID},'
        f'"ts":{_fmt(t)},"dur":{_fmt(end - t)}}}'
    )
    w.parts[dense_index] = (
        f'{{"ph":"X","cat":"cpu_op","name":"aten::_local_scalar_dense","pid":{HOST_PID},'
        f'"tid":{MAIN_TID},"ts":{_fmt(t + 1.0)},"dur":{_fmt(end - t - 2.0)}}}'
    )
    step_end = end + 3.0
    w.parts[events_before] = (
        f'{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{step}","pid":{HOST_PID},"tid":{MAIN_TID},'
        f'"ts":{_fmt(step_start)},"dur":{_fmt(step_end - step_start)}}}'
    )
    if step % 10 == 0:
        w.raw(
            f'{{"ph":"C","name":"GPU memory","pid":{GPU_PID},"ts":{_fmt(step_end)},'
            f'"args":{{"allocated_mb":{1000 + (step % 7) * 10},"reserved_mb":2048}}}}'
        )
    return step_end + 1.0


def _metadata_events() -> list[str]:
    names = [
        ("process_name", HOST_PID, None, "python3 train.py"),
        ("process_name", GPU_PID, None, "GPU 0"),
        ("thread_name", HOST_PID, MAIN_TID, "python main thread"),
        ("thread_name", HOST_PID, BWD_TID, "autograd thread"),
        ("thread_name", HOST_PID, LOADER_TID, "data loader"),
        ("thread_name", GPU_PID, COMPUTE_STREAM, "stream 7"),
        ("thread_name", GPU_PID, NCCL_STREAM, "stream 20 (nccl)"),
    ]
    out = []
    for kind, pid, tid, name in names:
        tid_part = f',"tid":{tid}' if tid is not None else ""
        out.append(f'{{"ph":"M","name":"{kind}","pid":{pid}{tid_part},"args":{{"name":"{name}"}}}}')
    return out


def _kineto_metadata_events() -> list[str]:
    """Kineto's metadata: process names, labels and sort indices, thread names (with a ``ts``, as kineto writes)."""
    ts = _fmt(BASE_TS - 120.0)
    meta = [
        ("process_name", HOST_PID, 0, '"name":"python3"'),
        ("process_labels", HOST_PID, 0, '"labels":"CPU"'),
        ("process_sort_index", HOST_PID, 0, f'"sort_index":{HOST_PID}'),
        ("process_name", GPU_PID, 0, '"name":"python3"'),
        ("process_labels", GPU_PID, 0, '"labels":"GPU 0"'),
        ("process_sort_index", GPU_PID, 0, '"sort_index":16777216'),
    ]
    for tid, name in (
        (MAIN_TID, f"thread {MAIN_TID} (python3)"),
        (BWD_TID, f"thread {BWD_TID} (pt_autograd_0)"),
        (LOADER_TID, f"thread {LOADER_TID} (pt_data_worker)"),
    ):
        meta.append(("thread_name", HOST_PID, tid, f'"name":"{name}"'))
    for stream in (COMPUTE_STREAM, NCCL_STREAM):
        meta.append(("thread_name", GPU_PID, stream, f'"name":"stream {stream}"'))
        meta.append(("thread_sort_index", GPU_PID, stream, f'"sort_index":{stream}'))
    return [
        f'{{"name":"{kind}","ph":"M","ts":{ts},"pid":{pid},"tid":{tid},"args":{{{args}}}}}'
        for kind, pid, tid, args in meta
    ]


def _kineto_bookkeeping(start: float, end: float) -> list[str]:
    """The profiler's own span and iteration marker on the ``Spans`` / ``Traces`` pseudo-processes."""
    return [
        f'{{"ph":"X","cat":"Trace","ts":{_fmt(start)},"dur":{_fmt(end - start)},"pid":"Spans",'
        f'"tid":"PyTorch Profiler","name":"PyTorch Profiler (0)","args":{{"Op count":0}}}}',
        f'{{"name":"Iteration Start: PyTorch Profiler","ph":"i","s":"g","pid":"Traces",'
        f'"tid":"Trace PyTorch Profiler","ts":{_fmt(start)}}}',
    ]


def iter_trace_chunks(
    steps: int,
    *,
    seed: int = 0,
    args: str = "gpu",
    layers: int = len(_LAYERS),
    extra_events: list[str] | None = None,
    rank: int = 0,
    world_size: int = 1,
) -> Iterator[str]:
    """Yield the JSON text of a trace object ``{"traceEvents": [...]}`` in chunks, step by step.

    ``args="kineto"`` writes what the PyTorch profiler writes for the steps it records: args on every
    event (``External id``; ``correlation`` on both the runtime call and the kernel), ``ac2g`` flows from
    each launch to its GPU event, ``fwdbwd`` flows from forward to backward ops, the profiler's bookkeeping
    span, kineto's metadata, ``distributedInfo`` (``rank`` of ``world_size``) and ``baseTimeNanoseconds``.
    """
    rng = random.Random(seed)
    kineto = args == "kineto"
    if kineto:
        yield (
            '{"schemaVersion":1,"deviceProperties":[{"id":0,"name":"Synthetic GPU","totalGlobalMem":42297524224,'
            '"computeMajor":8,"computeMinor":0,"numSms":108}],'
            f'"distributedInfo":{{"backend":"nccl","rank":{int(rank)},"world_size":{int(world_size)}}},'
            '"displayTimeUnit":"ms","baseTimeNanoseconds":1700000000000000000,"traceEvents":[\n'
        )
    else:
        yield (
            '{"schemaVersion":1,"deviceProperties":[{"id":0,"name":"Synthetic GPU"}],'
            '"displayTimeUnit":"ms","traceEvents":[\n'
        )
    first = True
    head = (_kineto_metadata_events() if kineto else _metadata_events()) + list(extra_events or [])
    yield ",\n".join(head)
    first = not head
    t = BASE_TS
    batch: list[str] = []
    correlation = flow_id = 0
    for step in range(steps):
        w = _Writer(args, correlation, flow_id)
        t = _step(w, step, t, rng, layers)
        correlation, flow_id = w.correlation, w.flow_id
        batch.append(",\n".join(w.parts))
        if len(batch) >= 200 or len(w.parts) > 100_000:
            yield ("" if first else ",\n") + ",\n".join(batch)
            first = False
            batch = []
    if kineto:
        batch.append(",\n".join(_kineto_bookkeeping(BASE_TS - 50.0, t + 20.0)))
    if batch:
        yield ("" if first else ",\n") + ",\n".join(batch)
    yield '\n],"traceName":"synthetic training loop"}\n'


def events_per_step(layers: int = len(_LAYERS), args: str = "none") -> int:
    """How many trace events one synthetic step of ``layers`` layers has (excluding counters and metadata)."""
    w = _Writer(args)
    _step(w, 1, BASE_TS, random.Random(0), layers)
    return w.count


def write_chrome_trace(
    path: str | os.PathLike[str],
    steps: int,
    *,
    seed: int = 0,
    args: str = "gpu",
    layers: int = len(_LAYERS),
    compress: bool | None = None,
    extra_events: list[str] | None = None,
    rank: int = 0,
    world_size: int = 1,
) -> Path:
    """Write a synthetic training-loop trace of ``steps`` steps to ``path`` (gzip when it ends .gz).

    ``args``, ``layers``, ``rank`` and ``world_size``: see :func:`iter_trace_chunks`.
    """
    path = Path(path)
    compress = path.suffix == ".gz" if compress is None else compress
    tmp = path.with_name(f".{path.name}.tmp")
    with contextlib.ExitStack() as stack:
        if compress:
            # mtime=0: the same content gives the same bytes (reproducible fixtures)
            raw = stack.enter_context(open(tmp, "wb"))
            gz = stack.enter_context(gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0))
            handle: io.TextIOBase = stack.enter_context(io.TextIOWrapper(gz, encoding="utf-8"))
        else:
            handle = stack.enter_context(open(tmp, "w", encoding="utf-8"))
        for chunk in iter_trace_chunks(
            steps,
            seed=seed,
            args=args,
            layers=layers,
            extra_events=extra_events,
            rank=rank,
            world_size=world_size,
        ):
            handle.write(chunk)
    os.replace(tmp, path)
    return path
