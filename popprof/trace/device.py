"""Which trace events are device activity, and in which category.

Every trace reader fills ``events.device_category`` (compute, exchange, host_io,
sync, other; ``host_wait`` for host calls that block on the device, which are host
time, never device time; missing for other host events) through one mechanism: a *device map*,
an ordered mapping ``category -> regular expression``. Each event is described
by the key ``"<channel>:<name>"`` (for Chrome traces the channel is the event's
``cat``); the first category whose expression matches (``re.search``) wins, and
an event no expression matches is a host event.

The defaults below are documented in ``docs/traces.md``. Users override them by
passing ``device_map={...}`` to the readers (or ``--device-map`` on the CLI):
their entries are tried first, in their order, then the defaults; a category
mapped to ``None`` or ``""`` switches its default off. Matching runs once per distinct
(channel, name) pair, so it costs nothing per event.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..model.errors import UsageError

if TYPE_CHECKING:
    from ..io.patterns import Matcher

#: Device-activity categories (the step categories, without ``global_exchange``,
#: which host-side traces cannot tell apart from exchange).
DEVICE_CATEGORIES: tuple[str, ...] = ("compute", "exchange", "host_io", "sync", "other")
#: A host call that blocks until the device catches up (cudaDeviceSynchronize, cudaMemcpy, ...):
#: marked so attribution can say "the host was waiting for the device", never counted as device time.
HOST_WAIT = "host_wait"
#: Every value ``events.device_category`` can take.
EVENT_CATEGORIES: tuple[str, ...] = (*DEVICE_CATEGORIES, HOST_WAIT)

#: ``cuda_profiler_range``: kernels as CUPTI's range profiler records them (one X event per kernel on the
#: GPU's pid, with its counters in args).
_GPU_CATS = (
    r"(?:kernel|Kernel|gpu_op|gpu_memcpy|gpu_memset|Memcpy|Memset|cuda_kernel|cuda_profiler_range"
    r"|mtia_ccp_events)"
)
#: MTIA's device work (Kineto's ``mtia_ccp_events``, HTA's MTIA traces): its DMA requests move data between the
#: host and the device (HTA's ``MEMORY``: names starting ``dma``), ``event_wait`` is a stream waiting on
#: another's event (``args.wait_on_stream``: the device-side sync of Kineto's ``cuda_sync`` track), the rest is
#: the device's work (``pe_exe``, ``merge``, operator kernels such as ``fc-dtype_Float``).
_MTIA_DMA = r"^mtia_ccp_events:dma"
_MTIA_WAIT = r"^mtia_ccp_events:event_wait$"
#: MTIA's host calls that block until the device catches up (its runtime's ``synchronize``,
#: ``synchronizeStream``, on the ``mtia_runtime`` channel): host waits, as ``cudaStreamSynchronize`` is.
_MTIA_SYNC_CALLS = r"^mtia_runtime:synchronize(?:Stream|Device)?$"
#: Kineto categories of device work (kernels, copies, memsets; range-profiler kernels; MTIA's). Only an event in
#: one of these, or on a pid that holds one, is device work: a host event carrying ``args.stream`` (Inductor's
#: Triton launcher, a ``cpu_op`` with ``kernel_backend: "triton"``) stays host work (``docs/traces.md``).
DEVICE_CHANNELS: tuple[str, ...] = (
    "kernel",
    "Kernel",
    "gpu_op",
    "gpu_memcpy",
    "gpu_memset",
    "Memcpy",
    "Memset",
    "cuda_kernel",
    "cuda_profiler_range",
    "mtia_ccp_events",
)
#: Collectives by kernel name: NCCL and RCCL kernels, rocSHMEM / NVSHMEM kernels, torch symmetric-memory
#: (``multimem_all_reduce_kernel``, ``one_shot_all_reduce_kernel``, ``two_shot_all_reduce_kernel``), vLLM /
#: SGLang custom all-reduce (``cross_device_reduce_1stage``) and any kernel named after a collective, but not
#: ATen's element-wise kernels that broadcast their operands (``type_specialized_broadcast_kernel_launcher``,
#: in TraceLens's xDiT traces: a multiply, not a collective). XLA's HLO names spell collectives with hyphens
#: (a TPU's ops: ``all-reduce``, ``all-gather.1``, ``collective-permute``); its ``broadcast.2`` (a scalar
#: repeated into a tensor) and ``broadcast_add_fusion`` (element-wise work) are not collectives (xprof's
#: tpu_inference_2). The one definition of communication: the device map's ``exchange`` (what ``check`` reads)
#: and the summary's ``COMMUNICATION``.
_COLLECTIVE = (
    r"(?i:nccl|rccl|rocshmem|nvshmem|multimem|cross_device_reduce"
    r"|all[_-]?reduce|all[_-]?gather|reduce[_-]?scatter|all[_-]?to[_-]?all|collective[_-]permute"
    r"|broadcast(?!_kernel_launcher|\.\d|[\w.-]*fusion)|send_?recv)"
)
#: HLO categories of TPU ops that move data or wait for it (an XPlane TPU op's ``hlo_category``): copies to and
#: from host memory, collectives over the chips' interconnect. Their rate is the link's, which the peak table does
#: not hold, so the roofline rule (``metrics/tpu_operations.py``) leaves them out as it leaves out a GPU's copies.
NOT_ON_THE_ROOFLINE: frozenset[str] = frozenset(
    {
        "copy",
        "copy-start",
        "copy-done",
        "all-reduce",
        "all-gather",
        "reduce-scatter",
        "all-to-all",
        "collective-permute",
        "send",
        "recv",
        "send-done",
        "recv-done",
        "host send",
        "host recv",
    }
)
#: Host calls that block the calling thread until the device has done work: the synchronisations, the
#: synchronous copies (CUDA's "API synchronization behavior": a synchronous memcpy syncs the stream before a
#: copy from pageable memory and returns only after a copy to the host; not the driver's ``cuMemcpyDtoD``,
#: which never syncs the host) and ``cudaFree`` (it waits for the work that may use the memory). Not
#: ``cudaStreamWaitEvent`` (it makes a stream wait on an event on the device while the host goes on: the
#: ``cuda_sync`` track and ``device.dependency-waits`` show that wait) nor the synchronous memsets
#: (asynchronous with respect to the host unless the target is pinned host or managed memory).
SYNC_CALLS = (
    r"(?:cuda|hip)(?:DeviceSynchronize|StreamSynchronize|EventSynchronize"
    r"|Memcpy|Memcpy2D|Memcpy3D|MemcpyToSymbol|MemcpyFromSymbol|MemcpyWithStream|Free)"
    r"|cu(?:CtxSynchronize|StreamSynchronize|EventSynchronize|MemcpyHtoD|MemcpyDtoH"
    r"|Memcpy)"
)

#: Chrome traces (PyTorch profiler / kineto, TensorFlow, JAX): GPU work by ``cat``, then name.
CHROME_DEVICE_MAP: dict[str, str] = {
    # host <-> device copies: the GPU analogue of IPU stream copies
    "host_io": rf"^{_GPU_CATS}:.*Memcpy ?(?:HtoD|DtoH|HtoH|HtoA|AtoH)|{_MTIA_DMA}",
    # collectives (NCCL/RCCL kernels) and peer-to-peer copies between devices
    "exchange": rf"^{_GPU_CATS}:(?:.*{_COLLECTIVE}|.*Memcpy ?PtoP)",
    # the device waiting on an event or the context (Kineto's cuda_sync track): device-side sync
    "sync": rf"^cuda_sync:|{_MTIA_WAIT}",
    # the host blocking on the device: a host event, never device time
    "host_wait": rf"^(?:cuda_runtime|cuda_driver|Runtime|Driver|hip_runtime)?:?(?:{SYNC_CALLS})$|{_MTIA_SYNC_CALLS}",
    # memset and on-device copies
    "other": r"^(?:gpu_memset|Memset|gpu_memcpy|Memcpy):|^(?:kernel|Kernel):.*(?:Memset|Memcpy DtoD)",
    # every other kernel
    "compute": r"^(?:kernel|Kernel|gpu_op|cuda_kernel|cuda_profiler_range|mtia_ccp_events):",
}

_COLLECTIVE_NAME = re.compile(_COLLECTIVE)


def is_collective(name: str) -> bool:
    """A kernel name the default device map puts in ``exchange`` (communication)."""
    return bool(_COLLECTIVE_NAME.search(name))


_POPLAR = r"^(?:Poplar|Drivers):"
#: System Analyser (.pvti): the SDK's own channels. The exact labels Poplar writes are not
#: public, so these are patterns on words the labels are expected to hold; override as needed.
PVTI_DEVICE_MAP: dict[str, str] = {
    "host_io": rf"{_POPLAR}.*(?i:stream ?copy|host ?exchange|copy ?(?:to|from) ?(?:device|host|ipu)|dma)",
    "sync": rf"{_POPLAR}.*(?i:\bsync|wait ?for|barrier)",
    "exchange": rf"{_POPLAR}.*(?i:exchange)",
    "compute": rf"{_POPLAR}(?!.*(?i:compil|load|build|construct|serial|deserial|prepar)).*"
    r"(?i:engine ?(?:::)?run|\brun\b|execut|\bprogram\b)",
}

#: rocprofiler-sdk JSON (:mod:`popprof.readers.rocprof`): kernels and copies carry Kineto's channels (``kernel``,
#: ``gpu_memcpy``) and names, so the Chrome rules hold; host calls are on the channel of their record section
#: (``hip_api``, ``hsa_api``, ``marker_api``, ``rccl_api``), of which HIP's synchronising calls are host waits.
ROCPROF_DEVICE_MAP: dict[str, str] = {
    **CHROME_DEVICE_MAP,
    "host_wait": rf"^hip_api:(?:{SYNC_CALLS})$",
}

DEFAULT_MAPS: dict[str, dict[str, str]] = {
    "chrome_trace": CHROME_DEVICE_MAP,
    "pvti": PVTI_DEVICE_MAP,
    "rocprof": ROCPROF_DEVICE_MAP,
    # XPlane profiles (popprof.readers.xplane): GPU stream events on Kineto's channels, copies and memsets under
    # Kineto's names (CopyHostToDevice -> Memcpy HtoD), so the Chrome rules hold as they are
    "xplane": CHROME_DEVICE_MAP,
    # Nsight Systems SQLite exports (popprof.readers.nsys): kernels, copies, memsets, runtime calls and NVTX
    # ranges on Kineto's channels and names, so the Chrome rules hold as they are
    "nsys": CHROME_DEVICE_MAP,
}


def load_device_map(value: str | Mapping[str, str | None] | None) -> dict[str, str | None] | None:
    """Accept a mapping, a JSON object string, or a path to a JSON file; validate categories and patterns.

    A file goes through the option-file checks (a regular file within ``option-bytes``: never a FIFO or
    ``/dev/zero``); every pattern through :func:`popprof.io.patterns.compile_bounded` (one that could
    backtrack catastrophically is one line, exit 2).
    """
    from ..io.files import read_option_file
    from ..io.patterns import compile_bounded

    if value is None:
        return None
    if isinstance(value, str):
        text = value
        if not value.lstrip().startswith("{"):
            text = read_option_file(value, "device map file").decode("utf-8", errors="replace")
        try:
            value = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise UsageError(f"device map is not valid JSON ({' '.join(str(exc).split())[:200]})") from None
        if not isinstance(value, dict):
            raise UsageError("device map must be a JSON object: category -> regular expression")
    out: dict[str, str | None] = {}
    for category, pattern in value.items():
        if category not in EVENT_CATEGORIES:
            raise UsageError(
                f"device map: unknown category {category!r}; use one of {', '.join(EVENT_CATEGORIES)}"
            )
        if pattern is not None and not isinstance(pattern, str):
            raise UsageError(
                f"device map: {category} is {type(pattern).__name__} {pattern!r}, expected a regular "
                'expression string (or "" to switch the category off)'
            )
        if pattern:
            compile_bounded(pattern, f"device map: {category}")
        out[category] = pattern or None
    return out


def resolve_map(
    source_format: str, override: Mapping[str, str | None] | None = None
) -> list[tuple[str, Matcher]]:
    """The ordered ``(category, compiled regex)`` rules: user entries first, then the defaults.

    A category the user maps to ``None`` or ``""`` loses its default rule.
    """
    from ..io.patterns import compile_bounded

    defaults = DEFAULT_MAPS.get(source_format, {})
    override = load_device_map(override) if override is not None else {}
    # the user's patterns as load_device_map checked them (RE2: linear time); the built-in ones with re
    rules: list[tuple[str, Matcher]] = [
        (c, compile_bounded(p, f"device map: {c}")) for c, p in override.items() if p
    ]
    disabled = {c for c, p in override.items() if not p}
    rules += [(c, re.compile(p)) for c, p in defaults.items() if c not in disabled]
    return rules


def classify(keys: list[str], rules: list[tuple[str, Matcher]]) -> list[str | None]:
    """The device category of each ``"channel:name"`` key (``None`` = host event)."""
    out: list[str | None] = []
    for key in keys:
        found = None
        for category, regex in rules:
            if regex.search(key):
                found = category
                break
        out.append(found)
    return out


def device_categories(
    channel: pd.Categorical | pd.Series, name: pd.Categorical | pd.Series, rules: list[tuple[str, Matcher]]
) -> pd.Categorical:
    """Vectorised: classify each distinct (channel, name) pair once, then broadcast to the events."""
    channel = pd.Categorical(channel)
    name = pd.Categorical(name)
    n = len(name)
    if n == 0:
        return pd.Categorical([], categories=list(EVENT_CATEGORIES))
    ch_codes = channel.codes.astype(np.int64) + 1  # -1 (missing) -> 0
    nm_codes = name.codes.astype(np.int64) + 1
    width = len(name.categories) + 1
    pair = ch_codes * width + nm_codes
    size = (len(channel.categories) + 1) * width
    if size <= DENSE_PAIRS:  # the pairs present from a count over every possible pair: no hash of the events
        uniq = np.flatnonzero(np.bincount(pair, minlength=size))
        inverse = None
    else:
        inverse, uniq = pd.factorize(pair)  # hashing, not sorting: O(n)
    ch_cats = [""] + [str(c) for c in channel.categories]
    nm_cats = [""] + [str(c) for c in name.categories]
    keys = [f"{ch_cats[c]}:{nm_cats[m]}" for c, m in (divmod(p, width) for p in uniq.tolist())]
    labels = classify(keys, rules)
    code_of = {cat: i for i, cat in enumerate(EVENT_CATEGORIES)}
    pair_codes = np.array([code_of[x] if x is not None else -1 for x in labels], dtype=np.int8)
    if inverse is None:
        lut = np.full(size, -1, dtype=np.int8)
        lut[uniq] = pair_codes
        codes = lut[pair]
    else:
        codes = pair_codes[inverse]
    return pd.Categorical.from_codes(codes, categories=list(EVENT_CATEGORIES))


#: up to this many possible (channel, name) pairs, :func:`device_categories` finds the pairs present by a
#: count over all of them
DENSE_PAIRS = 1 << 22


def apply_device_map(profile, device_map: Mapping[str, str | None] | str | None) -> None:
    """Re-derive ``events.device_category`` of an already-read profile (e.g. a bundle) under ``device_map``.

    Uses the defaults of the format the events were first read from (``target.source_format``), so a
    bundle of a Chrome trace classifies exactly as the trace itself read with the same map.
    """
    events = profile.get("events")
    if events is None or events.empty or device_map is None:
        return
    rules = resolve_map(profile.source_format, device_map)
    events = events.copy()
    events["device_category"] = device_categories(events["channel"].array, events["name"].array, rules)
    profile.set_table("events", events)
