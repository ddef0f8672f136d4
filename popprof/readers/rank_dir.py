"""A directory of per-rank traces (HolisticTraceAnalysis's layout) read as ONE profile.

A distributed PyTorch run writes one Kineto trace per rank into one directory; rocprofv3 under a
launcher writes one file per process (``<pid>_results.json``); Nsight Systems one report per rank
(``nsys profile -o report_%q{RANK}``, each exported with ``nsys export --type sqlite``). Opening the
directory gives one profile holding every rank: each event carries its ``rank`` (the file's own:
``distributedInfo.rank`` of a Chrome trace, the ``MPI Rank N`` thread of an nsys export; else
``rank-N`` / ``rank_N`` / ``rankN`` in the file name; else the lowest rank no file has, in the names'
natural order), ids are renumbered so they stay unique, and categorical labels are unioned. The files
are all Chrome traces, all rocprofv3 JSON or all nsys SQLite exports. Several large files are read in
parallel on forked worker processes (one file per worker, up to the number of cores;
:func:`popprof.io.parallel.map_processes`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from ..io import parallel
from ..io.files import read_head
from ..io.progress import progress
from ..io.sources import source_metadata
from ..model.errors import InputError
from ..model.profile import Deferred, Profile
from . import chrome, nsys, rocprof
from .bundle import is_bundle
from .dispatch import read_path
from .rundir import holds_run

FORMAT = "chrome_trace"
#: The formats a rank directory's files may have, one of them per directory, and each one's sniffer.
FORMATS = {chrome.FORMAT: chrome.sniff, rocprof.FORMAT: rocprof.sniff, nsys.FORMAT: nsys.sniff}
#: each format's files, as the error for a directory mixing them names them
KINDS = {
    chrome.FORMAT: "Chrome traces",
    rocprof.FORMAT: "rocprofv3 files",
    nsys.FORMAT: "Nsight Systems exports",
}
#: Read the files on several processes when there are at least two and they hold this many bytes.
PARALLEL_MIN_BYTES = 16 << 20
TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite")
#: an nsys export's tables of host activity, each row with its ``rank`` (``readers/nsys/host.py``)
HOST_TABLES = ("cpu_slices", "cpu_samples")


def trace_files(path: Path) -> list[Path]:
    """The trace files directly in ``path`` (Chrome or rocprofv3 JSON, nsys SQLite exports, in the names' natural
    order: ``9_results`` before ``10_results``); empty when it is not a rank directory."""
    return list(_sniffed(path))


def _natural(path: Path) -> list[object]:
    """A sort key that orders the numbers in a name by value (pids and ranks of different widths)."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", path.name)]


def _sniffed(path: Path) -> dict[Path, str | None]:
    """Each trace file in ``path`` with its format (None for a corrupt gzip: kept, so that reading it names the
    file and the problem)."""
    if not path.is_dir():
        return {}
    if is_bundle(path) or holds_run(path):
        return {}
    found: dict[Path, str | None] = {}
    for entry in sorted(path.iterdir(), key=_natural):
        if entry.is_file() and entry.name.endswith(TRACE_SUFFIXES) and entry.stat().st_size > 0:
            try:
                head = read_head(entry)
            except InputError:
                found[entry] = None
                continue
            kind = next((name for name, sniff in FORMATS.items() if sniff(entry, head)), None)
            if kind is not None:
                found[entry] = kind
    if found and all(_corrupt(f) for f in found):
        return {}
    return found


def _refuse_left_out(path: Path, traces: Sequence[Path]) -> None:
    """InputError naming the first file of a rank directory that is named like a rank's trace but would be left
    out: an empty ``*.json`` / ``*.json.gz`` file, or a ``*.json.gz`` that holds no trace (a damaged rank: read
    without it, the run would lose a rank unsaid). A plain ``*.json`` that is no trace (notes) is no rank."""
    read = set(traces)
    for entry in sorted(path.iterdir(), key=_natural):
        if entry in read or not entry.is_file() or not entry.name.endswith(TRACE_SUFFIXES):
            continue
        hint = "a damaged rank's trace? write it again, or move it out of the run directory"
        if entry.stat().st_size == 0:
            raise InputError(entry, "the file is empty", hint)
        if entry.name.endswith(".json.gz"):
            raise InputError(entry, "holds no Chrome or rocprofv3 trace", hint)


def _corrupt(path: Path) -> bool:
    try:
        read_head(path)
    except InputError:
        return True
    return False


def is_rank_directory(path: Path) -> bool:
    """Whether ``path`` is a directory of Chrome or rocprofv3 traces or nsys exports (and nothing popprof would
    read otherwise)."""
    return bool(trace_files(path))


def _read_one(job: tuple[str, dict]) -> Profile:
    path, options = job
    return read_path(Path(path), **options)


def _read_all(files: Sequence[Path], options: dict) -> list[Profile]:
    big = sum(f.stat().st_size for f in files) >= PARALLEL_MIN_BYTES
    if len(files) >= 2 and big:
        # each worker parses whole files on its own (no nested split), so both cores stay busy
        jobs = [(str(f), {**options, "parallel": False}) for f in files]
        try:
            return parallel.map_processes(_read_one, jobs, parallel.cores())
        except Exception:  # noqa: BLE001 - any failure: read here, which reports the problem with the file's name
            pass
    return [read_path(f, **options) for f in files]


def _union(columns: list[pd.Series]) -> pd.Categorical:
    cats = [pd.Categorical(c) for c in columns]
    return union_categoricals(cats, ignore_order=True)


def concat_tables(frames: list[pd.DataFrame], id_columns: Sequence[str] = ()) -> pd.DataFrame:
    """Concatenate tables, unioning categoricals and offsetting ``id_columns`` so ids stay unique."""
    frames = [f for f in frames if f is not None]
    if not frames:
        return pd.DataFrame()
    columns: dict[str, object] = {}
    offsets = np.cumsum([0] + [len(f) for f in frames[:-1]])
    for name in frames[0].columns:
        parts = [f[name] for f in frames]
        if isinstance(parts[0].dtype, pd.CategoricalDtype):
            columns[name] = _union(parts)
        elif name in id_columns:
            columns[name] = pd.concat(
                [p + int(o) for p, o in zip(parts, offsets, strict=True)], ignore_index=True
            )
        else:
            columns[name] = pd.concat(parts, ignore_index=True)
    return pd.DataFrame(columns)


def read(path: Path, **options: object) -> Profile:
    """Read every rank trace of a directory into one profile (see the module docstring)."""
    sniffed = _sniffed(path)
    files = list(sniffed)
    if not files:
        raise InputError(
            path, "directory holds no Chrome trace (*.json / *.json.gz) or nsys export (*.sqlite)"
        )
    kinds = sorted({kind for kind in sniffed.values() if kind is not None}, key=list(FORMATS).index)
    if len(kinds) > 1:
        raise InputError(
            path,
            f"a directory is one run, its traces of one kind: it holds {' and '.join(KINDS[k] for k in kinds)} "
            f"({', '.join(f.name for f in files[:4])}{', ...' if len(files) > 4 else ''}); open each alone",
        )
    kind = kinds[0] if kinds else FORMAT
    _refuse_left_out(path, files)
    # every rank's flows are read with its events: the directory's flows table joins them (a read that would
    # count them only, flows_on_use, would have to read every file again for it)
    options = {key: value for key, value in options.items() if key != "flows_on_use"}
    with progress(f"reading {len(files)} rank traces in {path.name}"):
        profiles = _read_all(files, options)
    if kind == rocprof.FORMAT:
        _one_file_a_process(path, files, profiles)
    ranks, notes = _ranks(path, files, profiles)
    offsets = _on_one_clock(profiles) if kind == nsys.FORMAT else None
    events = concat_tables([p.events for p in profiles], id_columns=("event_id", "parent_id"))
    threads = concat_tables([p.get("threads") for p in profiles])
    counters = concat_tables([p.get("counters") for p in profiles])
    flows = concat_tables([p.get("flows") for p in profiles])
    allocations = _allocations(profiles)
    host = {table: concat_tables([p.get(table) for p in profiles]) for table in HOST_TABLES}
    metadata: dict[str, object] = dict(source_metadata(kind, files))
    warnings: Counter = Counter()
    texts: dict[str, list[str]] = {}
    for file, profile in zip(files, profiles, strict=True):
        for key, value in profile.meta.items():
            if not key.startswith("warnings."):
                continue
            if str(value).isdigit():
                warnings[key] += int(value)
            else:
                texts.setdefault(key, []).append(f"{file.name}: {value}")
    metadata.update(warnings)
    metadata.update({key: "; ".join(values) for key, values in texts.items()})
    if kind == FORMAT:
        metadata["chrome.events_read"] = sum(int(p.meta.get("chrome.events_read", 0)) for p in profiles)
        metadata["chrome.flows"] = sum(int(p.meta.get("chrome.flows", 0)) for p in profiles)
    metadata["trace.ranks"] = json.dumps(ranks)
    metadata["trace.rank_files"] = json.dumps({str(r): f.name for r, f in zip(ranks, files, strict=True)})
    for key, value in profiles[0].meta.items():
        if key.startswith("chrome.top.") and key != "chrome.top.distributedInfo":
            metadata.setdefault(key, value)
    if kind == nsys.FORMAT:
        metadata.update(_nsys_metadata(files, ranks, profiles))
        if offsets is not None:
            metadata["nsys.rank_offsets_us"] = json.dumps(
                {str(r): offset for r, offset in zip(ranks, offsets, strict=True)}
            )
            apart = sum(offset > SESSIONS_APART_US for offset in offsets)
            if apart:
                metadata["warnings.sessions_apart"] = apart
    if notes:
        metadata["trace.rank_notes"] = json.dumps(notes)
        metadata["warnings.rank_given"] = len(notes)

    return Profile(
        path.name or "ranks",
        {
            "target": {"source_format": [kind]},
            "events": events,
            "threads": threads if len(threads.columns) else None,
            "counters": counters if len(counters.columns) else None,
            "flows": flows if len(flows.columns) else None,
            "allocations": allocations,
            **{table: frame for table, frame in host.items() if len(frame.columns)},
        },
        source=str(path),
        metadata=metadata,
    )


def _allocations(profiles: Sequence[Profile]) -> Deferred | None:
    """Every rank's ``allocations``, built when first used as each rank's is (only ranks whose traces hold
    ``[memory]`` events have one), their ``event_id`` offset as the directory's ``events`` offsets it."""
    offsets = np.cumsum([0] + [len(p.events) for p in profiles[:-1]])
    parts = [(p, int(o)) for p, o in zip(profiles, offsets, strict=True) if p.rows("allocations")]
    if not parts:
        return None
    return Deferred(sum(p.rows("allocations") for p, _ in parts), partial(_joined_allocations, parts))


def _joined_allocations(parts: list[tuple[Profile, int]]) -> pd.DataFrame:
    frames = []
    for profile, offset in parts:
        frame = profile.allocations
        frames.append(frame.assign(event_id=frame["event_id"] + offset))
    return concat_tables(frames)


def _ranks(path: Path, files: Sequence[Path], profiles: Sequence[Profile]) -> tuple[list[int], list[str]]:
    """Each file's rank, and a note per file given one.

    A file's own rank (:func:`_own_rank`: an nsys export's ``MPI Rank N`` thread, a Chrome trace's
    ``distributedInfo.rank``, else ``rank-N`` in its name) is kept; a file without one is given the lowest rank
    no file has, in name order (its position when no file has a rank of its own). Each file's
    ``trace.rank_source`` says where its rank came from, when known (``given`` for a rank given here).
    Two files with the same rank of their own are refused: a directory is one run, one trace per rank, and
    two traces under one rank (HTA's ``mixed_files``: traces of different runs side by side, or two
    profiling windows of one worker) would be read as one device's timeline, their times interleaved.
    """
    own = [_own_rank(profile) for profile in profiles]
    _refuse_two_of_one_rank(path, files, own)
    taken = {rank for rank, _ in own if rank is not None}
    free = (rank for rank in range(len(files) + len(taken)) if rank not in taken)
    ranks: list[int] = []
    notes: list[str] = []
    for file, profile, (rank, source) in zip(files, profiles, own, strict=True):
        if rank is None:
            rank, source = next(free), "given"
            within = (
                "its MPI Rank thread"
                if profile.meta.get("source_format") == nsys.FORMAT
                else "distributedInfo"
            )
            notes.append(f"{file.name}: no rank in {within} or the file name; given rank {rank}")
        if profile.meta.get("trace.rank") != str(rank):  # given, or an nsys export's MPI rank over its name's
            _set_rank(profile, rank)
        if source:
            profile.update_metadata({"trace.rank_source": source})
        ranks.append(rank)
    return ranks, notes


def _refuse_two_of_one_rank(path: Path, files: Sequence[Path], own: Sequence[tuple[int | None, str]]) -> None:
    """InputError naming the files (and where each one's rank came from) when two have the same rank of their
    own."""
    by_rank: dict[int, list[str]] = {}
    for file, (rank, source) in zip(files, own, strict=True):
        if rank is not None:
            by_rank.setdefault(rank, []).append(f"{file.name} ({source})" if source else file.name)
    duplicates = {rank: names for rank, names in sorted(by_rank.items()) if len(names) > 1}
    if duplicates:
        said = "; ".join(f"rank {rank}: {', '.join(names)}" for rank, names in duplicates.items())
        raise InputError(
            path,
            f"more than one trace of one rank ({said}): a directory is one run with one trace per rank; "
            "open each file alone, or move the other runs' files out",
        )


def _own_rank(profile: Profile) -> tuple[int | None, str]:
    """A file's own rank and where it was found: an nsys export's ``MPI Rank N`` thread, else what its reader
    took (``distributedInfo.rank`` of a Chrome trace, else the file name)."""
    if profile.meta.get("nsys.mpi_rank") is not None:
        rank = int(profile.meta["nsys.mpi_rank"])
        return rank, f"thread MPI Rank {rank}"
    rank = profile.meta.get("trace.rank")
    if rank is None:
        return None, ""
    return int(rank), str(profile.meta.get("trace.rank_source", ""))


def _one_file_a_process(path: Path, files: Sequence[Path], profiles: Sequence[Profile]) -> None:
    """rocprofv3 files name no rank: refuse two files of one process (the same pid started at the same
    nanosecond: a copy, or one output read twice), which would be read as two ranks."""
    seen: dict[tuple[object, object], str] = {}
    for file, profile in zip(files, profiles, strict=True):
        key = (profile.meta.get("rocprof.pid"), profile.meta.get("rocprof.init_time_ns"))
        if key[0] is None:
            continue
        if key in seen:
            raise InputError(
                path,
                f"{seen[key]} and {file.name} are one process's trace (pid {key[0]}, started at the same "
                "time): a directory is one run with one trace per process; remove the copy",
            )
        seen[key] = file.name


def _set_rank(profile: Profile, rank: int) -> None:
    for table in ("events", "threads", "flows", *HOST_TABLES):
        frame = profile.get(table)
        if frame is not None and "rank" in frame.columns:
            frame = frame.copy()
            frame["rank"] = pd.array(np.full(len(frame), rank), dtype="Int64")
            profile.set_table(table, frame)


#: nsys metadata counting rows of each file: summed over the directory's files
NSYS_SUMMED = ("nsys.backtrace_twins_left_out", "nsys.sched_switches_unpaired")
#: nsys metadata holding a JSON object of counts by table: summed table by table
NSYS_COUNTS = ("nsys.rows", "nsys.unread_tables")


def _nsys_metadata(
    files: Sequence[Path], ranks: Sequence[int], profiles: Sequence[Profile]
) -> dict[str, object]:
    """The nsys metadata of a directory of exports: counts summed over the files; the nsys version (one, else
    each file's); each rank's GPUs, session start and where its rank came from, by rank."""
    metadata: dict[str, object] = {}
    for key in NSYS_SUMMED:
        if any(key in p.meta for p in profiles):
            metadata[key] = sum(int(p.meta.get(key, 0)) for p in profiles)
    for key in NSYS_COUNTS:
        total: Counter = Counter()
        for profile in profiles:
            total.update(json.loads(profile.meta.get(key, "{}")))
        if total:
            metadata[key] = json.dumps(dict(total))
    versions = {
        f.name: str(p.meta["nsys.version"])
        for f, p in zip(files, profiles, strict=True)
        if "nsys.version" in p.meta
    }
    if len(set(versions.values())) == 1:
        metadata["nsys.version"] = next(iter(versions.values()))
    elif versions:
        metadata["nsys.version"] = json.dumps(versions)
    by_rank = {str(r): p.meta for r, p in zip(ranks, profiles, strict=True)}
    gpus = {r: json.loads(m["nsys.gpus"]) for r, m in by_rank.items() if "nsys.gpus" in m}
    starts = {
        r: int(m["nsys.session_start_utc_ns"]) for r, m in by_rank.items() if "nsys.session_start_utc_ns" in m
    }
    sources = {r: m["trace.rank_source"] for r, m in by_rank.items() if m.get("trace.rank_source")}
    for key, value in (("nsys.gpus_by_rank", gpus), ("nsys.session_start_utc_ns_by_rank", starts)):
        if value:
            metadata[key] = json.dumps(value)
    if sources:
        metadata["trace.rank_sources"] = json.dumps(sources)
    return metadata


#: the ranks of one run start their sessions within seconds or minutes of each other: an export whose session
#: starts more than this after the first rank's is warned about (``warnings.sessions_apart``)
SESSIONS_APART_US = 3600e6
#: each table of an nsys export's profile with times from the session's start, and its time columns
NSYS_TIMES = {
    "events": ("start_us",),
    "cpu_slices": ("start_us",),
    "cpu_samples": ("ts_us",),
    "flows": ("ts_us",),
}


def _on_one_clock(profiles: Sequence[Profile]) -> list[float] | None:
    """Put the ranks' nsys exports on one clock: an export's times count from its own session's start, and the
    ranks' sessions start apart (each rank's ``nsys profile`` starts with its process), so each rank's times are
    moved by its session's start (``nsys.session_start_utc_ns``, UTC) after the earliest, as Nsight Systems
    lines up several reports of one run. Returns each rank's offset in µs; None, with nothing moved, when an
    export does not record its start (the ranks' times then stay each from its own start)."""
    starts = [profile.meta.get("nsys.session_start_utc_ns") for profile in profiles]
    if any(start is None for start in starts):
        return None
    first = min(int(start) for start in starts)
    offsets = [(int(start) - first) / 1000.0 for start in starts]
    for profile, offset in zip(profiles, offsets, strict=True):
        if offset:
            for table, columns in NSYS_TIMES.items():
                frame = profile.get(table)
                if frame is not None and len(frame):
                    profile.set_table(table, frame.assign(**{c: frame[c] + offset for c in columns}))
    return offsets
