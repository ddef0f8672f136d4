"""The Chrome trace reader's front: ``read`` (the plan :mod:`.plan` chooses, run serial or split, into a
Profile); ``FORMAT`` and ``sniff`` are :mod:`.sniffing`'s."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import partial
from pathlib import Path

import numpy as np

from ...io import parallel as parallel_work
from ...io.files import ChangedWhileRead, is_gzip, snapshot
from ...io.heap import gc_paused, release_free_memory
from ...io.progress import reading
from ...io.sources import describe_meanwhile
from ...model.errors import InputError
from ...model.profile import Deferred, Profile
from ...trace import frame
from ...trace.begin_end import match_begin_end
from . import early, split
from .allocations import allocations_of, allocations_read_on_use, memory_rows
from .columns import concat_flows, json_text
from .events import INSTANT_SCOPES
from .parse import parse_file, read_problem
from .plan import Plan, PlanError, choose
from .plan import metadata as plan_metadata
from .sniffing import FORMAT, event_prefix, reads_args, sniff
from .tables import (
    BOOKKEEPING_PROCESSES,
    RANGE_PROFILER_CHANNEL,
    bookkeeping_mask,
    counter_frame,
    flow_frame,
    host_stream_mask,
    kineto_columns,
    merge_args,
    thread_metadata,
    trace_rank,
    unstreamed_device_mask,
)

__all__ = ["FORMAT", "read", "sniff"]


def read(
    path: Path,
    *,
    with_args: bool = False,
    device_map: Mapping[str, str | None] | str | None = None,
    parser: str | None = None,
    workers: int | None = None,
    parallel: bool = True,
    flows_on_use: bool = False,
    **_options: object,
) -> Profile:
    """Read a Chrome trace into a Profile with events, threads, counters, flows, target and metadata.

    ``parser`` (``"arrow"``, ``"orjson"``, ``"ijson"``) and ``workers`` (1 or 2 processes) name the plan
    (:mod:`.plan`); ``None`` lets it choose: Arrow, and for an uncompressed file of 8 MiB or more two
    processes, this one and a forked worker (``parallel=False`` is ``workers=1``). Pieces that do not parse
    cleanly fall back to one serial pass, which is what reports errors. The metadata names what ran
    (``chrome.parser``, ``chrome.workers``, ``chrome.plan``).

    ``with_args`` keeps each event's arguments (JSON text in ``events.args``); with the parser chosen
    automatically (every command, ``popprof.open(path)``), a CUPTI range-profiler trace's are read whatever it
    says (its hardware counters are there: :data:`.sniffing.COUNTER_MARKERS`). A parser given by name reads
    exactly as asked.

    ``flows_on_use``: the pass counts the flow events instead of reading them (about a tenth of the
    parse of a Kineto trace, whose flows are a third of its events), and the ``flows`` table is read
    from the file when first used, by a pass of its own (an error if the file changed since). For a
    command that shows figures without flows (``popprof summary``, ``check``); the table, its row
    count and every other table are the same either way.
    """
    if parser is None:  # the automatic plan: a range-profiler trace's counters are its kernels' arguments
        with_args = reads_args(path, with_args)
    # bytes read against the file size, worker processes included; no cyclic garbage collection (the
    # parse makes no cycles, and a collection walks every dict orjson made: the fork inherits that too)
    with reading(path), gc_paused():
        try:
            plan = choose(
                parser,
                workers if workers is not None or parallel else 1,
                size=path.stat().st_size,
                compressed=is_gzip(path),
                with_args=with_args,
                parallel_ok=parallel_work.cores() >= 2,
            )
            return _read(path, plan, with_args=with_args, device_map=device_map, flows=not flows_on_use)
        except PlanError as exc:
            raise InputError(path, str(exc)) from None


def _read(path: Path, plan: Plan, *, with_args: bool, device_map, flows: bool) -> Profile:
    before = snapshot(path)  # every read checks the file is still this one (a rewrite mid-read: one line)
    prefix = event_prefix(path)
    workers = None
    if plan.workers == 2:  # the worker a command started before its imports (early.start), else one now
        workers = early.adopt(prefix, with_args, before, flows, plan.parser) or split.start_parallel(
            path, prefix, with_args, FORMAT, before, flows=flows, parser=plan.parser
        )
        if workers is None:
            plan = plan.with_workers(
                1, "1 process: a second one could not start or the file has no place to cut"
            )
    else:
        early.discard()
    try:
        return _read_parts(
            path,
            prefix,
            workers,
            plan,
            with_args=with_args,
            device_map=device_map,
            before=before,
            flows=flows,
        )
    finally:
        if workers is not None:
            workers.close()


def _read_parts(
    path: Path,
    prefix: str,
    workers: split.Workers | None,
    plan: Plan,
    *,
    with_args: bool,
    device_map,
    before: tuple | None,
    flows: bool = True,
) -> Profile:
    parts = workers.parts() if workers is not None else None  # the worker has ended when this returns
    source = workers.source if workers is not None else describe_meanwhile(FORMAT, path)
    if parts is None:
        if workers is not None:
            plan = plan.with_workers(1, f"1 process: the pieces did not parse cleanly ({workers.why_serial})")
        parsed, plan = parse_file(path, prefix, with_args, before, flows, plan)
        parts = [parsed]
    elif workers is not None:  # the last part stops at the array's end: the plan read the members after it
        parts[-1].top.update(workers.tail)
    n_parts = len(parts)
    release_free_memory()  # what the parse and the transfer from the workers left in the heap
    split.unify_synthetic_ids(parts)
    parsed = split.merge(parts)
    del parts
    release_free_memory()
    x, b, kinds = parsed.x, parsed.b, parsed.b_kind
    warnings, truncated = parsed.warnings, parsed.error
    args: list | None = parsed.x_args if with_args else None
    if len(kinds):
        pairing = match_begin_end(kinds, b["pid"], b["tid"], b["ts"])
        warnings["unmatched_end"] += len(pairing.unmatched_end)
        warnings["unmatched_begin"] += len(pairing.unmatched_begin)
        warnings["out_of_order_timestamps"] += pairing.out_of_order
        starts = np.concatenate((pairing.begin, pairing.unmatched_begin))
        durs = np.concatenate(
            (b["ts"][pairing.end] - b["ts"][pairing.begin], np.full(len(pairing.unmatched_begin), np.nan))
        )
        for key in ("name", "cat", "pid", "tid", "ts", "stream", "corr", "device", "instant"):
            x[key] = np.concatenate((x[key], b[key][starts]))
        x["dur"] = np.concatenate((x["dur"], durs))
        if args is not None:
            be_args = parsed.b_args
            for s, e in zip(pairing.begin.tolist(), pairing.end.tolist(), strict=True):
                be_args[s] = merge_args(be_args[s], be_args[e])
            args = args + [be_args[i] for i in starts.tolist()]

    if truncated and parsed.parsed == 0:
        raise InputError(
            path,
            f"not valid JSON ({truncated})",
            "expected Chrome trace JSON; the file may be truncated or not JSON at all",
        )
    if len(x["ts"]) == 0 and not parsed.counters:
        raise InputError(
            path,
            "holds no usable trace events (no X/B/E/i/C events with timestamps)",
            "check that this is a Chrome trace (chrome://tracing / PyTorch profiler JSON)",
        )

    parsed.x = parsed.b = {}  # build_events gets the only references, so it can free them as it sorts
    rank = trace_rank(parsed.top, path)
    stream = x.pop("stream")
    if RANGE_PROFILER_CHANNEL in parsed.cats:  # CUPTI range-profiler kernels: GPU work, on their tid's track
        ranged = (x["cat"] == parsed.cats.index(RANGE_PROFILER_CHANNEL)) & np.isnan(stream)
        stream = np.where(ranged, x["tid"].astype(np.float64), stream)
    host = host_stream_mask(x["cat"], parsed.cats, x["pid"], stream)
    if host.any():  # a host event with args.stream (Inductor's Triton launcher) is host work
        stream = np.where(host, np.nan, stream)
    unstreamed = unstreamed_device_mask(x["cat"], parsed.cats, stream)  # MTIA's DMA track: device work
    extra = kineto_columns(stream, x.pop("corr"), x.pop("device"), x["pid"], unstreamed)
    extra["instant_scope"] = (x.pop("instant").astype(np.int32) - 1, list(INSTANT_SCOPES))
    events, counts = (
        frame.build_events(  # it gets the only references: each input column is freed once reordered
            pid=x.pop("pid"),
            tid=x.pop("tid"),
            start=x.pop("ts"),
            dur=x.pop("dur"),
            name_codes=x.pop("name"),
            names=parsed.names,
            channel_codes=x.pop("cat"),
            channels=parsed.cats,
            source_format=FORMAT,
            device_map=device_map,
            args=args,
            extra=extra,
        )
    )
    release_free_memory()  # the input-order columns build_events sorted and dropped
    events["rank"] = frame.constant_int(len(events), rank)
    bookkeeping_pids = [parsed.synthetic[k] for k in BOOKKEEPING_PROCESSES if k in parsed.synthetic]
    events["bookkeeping"] = bookkeeping_mask(events, bookkeeping_pids)
    warnings["partial_overlap"] += counts.get("partial_overlap", 0)
    process_names = dict(parsed.process_names)
    for label, synthetic in parsed.synthetic.items():
        process_names.setdefault(synthetic, str(label))
    threads = frame.build_threads(
        events,
        process_names,
        parsed.thread_names,
        extra=[(key[1], key[2] if len(key) > 2 else 0) for key in parsed.meta],
    )
    threads = thread_metadata(threads, parsed.meta)
    labels = {synthetic: str(label) for label, synthetic in parsed.synthetic.items()}
    if labels:  # a thread id written as text ("stream 7") names its thread
        text = threads["tid"].map(labels)
        threads["thread_name"] = threads["thread_name"].where(threads["thread_name"].notna(), text)
    threads["rank"] = frame.constant_int(len(threads), rank)
    counters = counter_frame(parsed.counters)
    n_flows = parsed.flow_count
    # built when first read (the timeline, a bundle, a query): summary and check never read flows; from
    # the flows this pass kept, or by a pass of its own over the file when this one only counted them
    if flows:
        build = partial(_flow_table, parsed.flow_chunks(), parsed.flow_labels, rank)
    else:
        build = partial(_flows_read_on_use, path, prefix, before, rank, n_flows, dict(parsed.synthetic), plan)
    flows_table = Deferred(n_flows, build) if n_flows else None
    # the allocator's [memory] events: their args when first used (summary's device memory), read then
    n_memory = len(memory_rows(events))
    agent_numbers = "roctracer_version" in parsed.top  # its GPU work numbered by HSA agent (allocations.py)
    if n_memory and with_args:
        allocations = Deferred(n_memory, partial(allocations_of, events, agent_numbers))
    elif n_memory:
        allocations = Deferred(
            n_memory,
            partial(allocations_read_on_use, path, before, events, _events_with_args, agent_numbers),
        )
    else:
        allocations = None

    metadata: dict[str, object] = dict(source())
    metadata["chrome.events_read"] = parsed.parsed
    metadata.update(plan_metadata(plan, n_parts))
    metadata["chrome.flows"] = n_flows
    for key, value in parsed.top.items():
        metadata[f"chrome.top.{key}"] = json_text(value)
    if rank is not None:
        metadata["trace.rank"] = rank
    if parsed.skipped:
        metadata["chrome.skipped_phases"] = json.dumps(dict(sorted(parsed.skipped.items())))
    for key, count in sorted(warnings.items()):
        if count:
            metadata[f"warnings.{key}"] = count
    # cut off ('ends early'), or damaged before its end (bytes flipped: where the JSON is invalid)
    if truncated:
        note, text = read_problem(path, truncated)
        metadata[f"warnings.{note}"] = text
    target = {"source_format": [FORMAT]}
    return Profile(
        path.name.removesuffix(".gz").removesuffix(".json") or path.stem,
        {
            "target": target,
            "events": events,
            "threads": threads,
            "counters": counters,
            "flows": flows_table,
            "allocations": allocations,
        },
        source=str(path),
        metadata=metadata,
    )


def _events_with_args(path: Path):
    """The ``events`` of ``path`` read again with args (one process), for the ``allocations`` table: by the
    automatic plan (orjson, as args need), which falls back to ijson where the first read did (a damaged file
    whose stream cannot be cut into blocks of whole events; a parser named here would refuse it instead)."""
    return read(path, with_args=True, parser=None, workers=1, flows_on_use=True).events


def _flow_table(chunks: list[dict], labels: list[str], rank: int | None):
    """The ``flows`` table from the parse's flow column sets (left as they are: it can be built again)."""
    return flow_frame(concat_flows(chunks, keep=True), labels, rank)


def _flows_read_on_use(
    path: Path,
    prefix: str,
    before: tuple | None,
    rank: int | None,
    rows: int,
    numbering: dict[object, int],
    plan: Plan,
):
    """The ``flows`` table of a read that only counted them: one pass of its own over the file, which must
    still be the one that was read (its snapshot, checked at every read of the pass as in any read; else
    ChangedWhileRead) and hold as many flows; ids written as text get the read's numbers (``numbering``), as
    the events that share them have. The read's parser (``plan``) reads them, in this process."""
    parsed, _ = parse_file(path, prefix, False, before, True, Plan(plan.parser, 1, plan.given))
    if parsed.flow_count != rows:
        raise ChangedWhileRead(path)
    split.unify_synthetic_ids([parsed], numbering)
    return _flow_table(parsed.flow_chunks(), parsed.flow_labels, rank)
