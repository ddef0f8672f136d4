"""The words for people: one word per meaning, the platform's own (the glossary in ``docs/figures.md``).

Tables and JSON keep the schema's codes (``device_category``: ``compute``, ``exchange``, ``host_io``,
``sync``, ``other``; ``steps.category`` adds ``global_exchange``); text, HTML, plots and pilot show
the word of the profile's platform through :func:`category_word`. A GPU trace speaks of
communication and copies, an IPU profile of exchange, global exchange, stream copies and sync.

Two waits that are easily confused get two words, never one:

- :data:`HOST_BLOCKED`: the host blocked in a call that waits for the device
  (``cudaDeviceSynchronize``, ``cudaStreamSynchronize``, a blocking ``cudaMemcpy``): the host waits;
- :data:`HOST_NOT_SUBMITTING`: the device idle because the host had not yet launched its next work
  item: the device waits. HolisticTraceAnalysis calls it "host wait"; where HTA's figure is shown it
  is labelled :data:`HTA_HOST_WAIT`.
"""

from __future__ import annotations

GPU, IPU = "gpu", "ipu"
#: Source formats that only IPU runs produce.
IPU_FORMATS: tuple[str, ...] = ("pop", "pvti", "synth", "text_summary", "oom_log", "sdk1_json")

#: The host blocked in sync calls, waiting for the device (``device_category`` ``host_wait``).
HOST_BLOCKED = "host blocked on device"
#: Device idle time before work whose launch came after the previous work ended (HTA's "host wait").
HOST_NOT_SUBMITTING = "host not submitting"
#: The time account's part of that idle (``idle_host``): each gap before the launch of the work that ended it.
IDLE_HOST = f"idle, {HOST_NOT_SUBMITTING}"
#: HTA's name for :data:`HOST_NOT_SUBMITTING`, labelled as HTA's wherever it shows.
HTA_HOST_WAIT = "host wait (HTA)"
#: HTA's name for a short gap between work launched in time (launch overhead).
HTA_KERNEL_WAIT = "kernel wait (HTA)"
#: A host thread running on a CPU (between its sched-in and sched-out: Nsight Systems' context switches).
ON_CPU = "on CPU"
#: A host thread not running: waiting on I/O, a lock or a blocking call, or runnable but preempted.
OFF_CPU = "off CPU"
#: HTA's idle causes (``idle_category`` codes of its idle breakdown) in words: HTA's names, labelled as HTA's. Its
#: "host wait" classifies whole gaps per stream; the time account splits each gap at the launch
#: (:data:`HOST_NOT_SUBMITTING` before it), so the two shares differ and never share a name.
HTA_IDLE_CAUSES = {"host_wait": HTA_HOST_WAIT, "kernel_wait": HTA_KERNEL_WAIT, "other": "other idle"}

#: The words of the schema's category codes, per platform.
CATEGORY_WORDS: dict[str, dict[str, str]] = {
    GPU: {
        "compute": "compute",
        "exchange": "communication",  # collectives (NCCL/RCCL) and peer copies
        "global_exchange": "communication",
        "host_io": "host-device copies",  # memcpy HtoD/DtoH
        "sync": "stream sync",  # the device waiting on an event or the context (Kineto's cuda_sync)
        "other": "on-device copies and memsets",
    },
    IPU: {
        "compute": "compute",
        "exchange": "exchange",
        "global_exchange": "global exchange",
        "host_io": "stream copies",
        "sync": "sync",
        "other": "other",
    },
}
#: The device table's columns of HTA's kinds of work, per platform: communication (GPU: HTA's
#: COMMUNICATION; IPU: all exchange = exchange + global exchange) and memory (GPU: HTA's MEMORY; IPU: stream copies).
COMMUNICATION_WORD = {GPU: "communication", IPU: "all exchange"}
MEMORY_WORD = {GPU: "copies", IPU: "stream copies"}
#: The title of the copies by kind (``metrics.copies``): the summary's block, the docs' section.
COPIES_TITLE = "Host-device copies"
#: Said where the copies' bytes are missing: the trace was read without its args.
COPIES_NO_BYTES = "bytes missing: not in the trace's args, or its args not read (--shapes)"
#: Said where a copy count is of transfers, not events (``metrics.copies``' ``count`` against ``ops``): an
#: XLA asynchronous copy on a TPU is two ops.
COPIES_TRANSFERS = "count: transfers, an XLA copy-start and its copy-done once"


#: What a pipelined IPU run loses per step to unbalanced stages: the slowest stage minus the mean stage.
STAGE_IMBALANCE = "stage imbalance"
#: How each part of a GPU trace's critical path (``metrics/critical_path.py``'s ``PARTS``) reads: summary text,
#: "What limits this run" and the report.
CRITICAL_PATH_WORDS: dict[str, str] = {
    "host": "host",
    "compute": "GPU compute",
    "communication": "communication",
    "launch_delay": "launch delay",
    "kernel_gap": "kernel gaps",
}
#: The title of each step's own critical path (``metrics/critical_path_steps.py``): summary text and report.
CRITICAL_PATH_BY_STEP = "Critical path by step"
#: A GPU stream's queue (``metrics/queue_length.py``): work launched by the host, not yet started on the stream
#: (HTA's queue length), and the time the stream held a full one (HTA's time blocked on a full queue).
QUEUE_LENGTH = "queue length"
FULL_QUEUE = "blocked on a full queue"
#: The options that free memory on the fullest tile, by the key of its savings (``metrics/tiles.py``).
MEMORY_SAVING_WORDS: dict[str, str] = {
    "fp16": "FP16 storage",
    "recomputation": "recomputation",
    "offloading": "offloading",
}


def steps_words(steps: list[int] | tuple[int, int] | None) -> str:
    """`` of step N`` / `` of steps A-B`` for a critical path of some profiler steps (``--steps``); empty for
    the whole trace's."""
    if not steps:
        return ""
    first, last = steps
    return f" of step {first}" if first == last else f" of steps {first}-{last}"


def category_word(code: object, platform: str | None) -> str:
    """The word for people of a category code on ``platform`` (``"gpu"`` or ``"ipu"``; other: IPU's).

    A code outside the schema's (a text summary's ``compute_excluding_idle``) reads with spaces.
    """
    text = str(code)
    words = CATEGORY_WORDS[GPU if platform == GPU else IPU]
    return words.get(text, text.replace("_", " "))


def platform_of_summary(summary: dict) -> str:
    """``"ipu"`` or ``"gpu"`` for a summary document (:func:`popprof.metrics.summary.summarise`): its device
    rows' platform, else an IPU format or IPU part (graph, memory, execution, an IPU target), else GPU."""
    trace = summary.get("trace") or {}
    rows = summary.get("devices") or trace.get("devices") or []
    platforms = {row.get("platform") for row in rows}
    if IPU in platforms:
        return IPU
    if GPU in platforms:
        return GPU
    if summary.get("source_format") in IPU_FORMATS:
        return IPU
    target = summary.get("target") or {}
    if any(summary.get(k) for k in ("graph", "memory", "execution")) or any(
        target.get(k) is not None for k in ("ipu_arch", "num_ipus", "num_tiles", "bytes_per_tile")
    ):
        return IPU
    return GPU
