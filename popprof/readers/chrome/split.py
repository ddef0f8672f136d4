"""The split parse: a large plain file cut into pieces between events, parsed by this process from the
front and a forked worker from the back, and the pieces merged into one :class:`Parsed`."""

from __future__ import annotations

import gc
import io
import pickle
from pathlib import Path

import numpy as np

from ...io import parallel
from ...io.bounded import TextAfterJson
from ...io.files import ChangedWhileRead, check_unchanged, guard_json, is_gzip
from ...io.heap import release_free_memory
from ...io.progress import counted
from ...io.workers import allow_import, refuse_import
from .columns import Ids, Interner, Parsed
from .framing import BOUNDARY, Unframeable, event_array_end, tail_members
from .longevent import Misframed
from .parse import UNFRAMED, parse_stream

#: the smallest piece a split file is cut into (where the two processes meet)
MIN_PIECE_BYTES = 2 << 20
#: seconds to wait for the lock on the pieces (it is held for microseconds)
CLAIM_TIMEOUT = 30.0


class _RangeReader(io.RawIOBase):
    """Bytes ``head`` + file[lo:hi] + ``tail``, as a readable stream (one part of a split file).

    Every read from the file checks that it is still the one the plan was made from (``before``, a
    :func:`~popprof.io.files.snapshot`: size, mtime, inode) and that it still reaches ``hi``: a file
    rewritten while its pieces are read ends in :class:`~popprof.io.files.ChangedWhileRead` at once, in
    whichever process reads it, instead of pieces of two versions that frame nowhere.
    """

    def __init__(
        self, path: Path, lo: int, hi: int, head: bytes, tail: bytes, before: tuple | None = None
    ) -> None:
        super().__init__()
        self._file = counted(open(path, "rb"))  # noqa: SIM115 - closed in close(); reads count toward progress
        self._file.seek(lo)
        self._left = hi - lo
        self._head = head
        self._tail = tail
        self._path, self._before = path, before

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = len(buffer)
        if self._head:
            data, self._head = self._head[:n], self._head[n:]
        elif self._left > 0:
            data = self._file.read(min(n, self._left))
            self._left -= len(data)
            if not data:  # the file ends before the piece does: it was cut or rewritten since the plan
                raise ChangedWhileRead(self._path)
            check_unchanged(self._path, self._before)
        else:
            data, self._tail = self._tail[:n], self._tail[n:]
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._file.close()
        super().close()


def _piece_fractions(size: int, middle: float = 0.5) -> list[float]:
    """Where to cut a file of ``size`` bytes into pieces for two processes that take them from both ends.

    Each piece covers half of what is left between its end of the file and ``middle``, down to
    pieces of about :data:`MIN_PIECE_BYTES`: the two processes start on large pieces and meet
    near ``middle`` on small ones, so the one that finishes first waits at most for a small piece.
    ``middle`` is where they are expected to meet: half-way when both start together, nearer the
    front when the worker starts first (:func:`meeting_point`).
    """
    front, at = [], 0.0
    while (middle - at) / 2 * size >= MIN_PIECE_BYTES:
        at += (middle - at) / 2
        front.append(at)
    back, at = [], 1.0
    while (at - middle) / 2 * size >= MIN_PIECE_BYTES:
        at -= (at - middle) / 2
        back.append(at)
    return front + [middle] + back[::-1]


#: what a worker started early (:mod:`.early`) parses before the reading process joins it, which imports
#: pandas first: about 0.15 s at about 80 MB/s a process (measured on the 2-core build machine, 2026-12)
EARLY_HEAD_START_BYTES = 12 << 20


def meeting_point(size: int, head_start: int = 0) -> float:
    """Where in a file of ``size`` bytes the two processes meet when the worker parses ``head_start`` bytes
    before the reading process starts (as a fraction from the front; never before a quarter)."""
    return max(0.25, 0.5 - head_start / (2 * size))


def _split_plan(
    path: Path, prefix: str, fractions: list[float], top: dict | None = None
) -> list[tuple[int, int, bytes, bytes]] | None:
    """Byte ranges that split the event array between events near ``fractions`` of the file, or ``None``.

    The top-level members after the event array (read with the array's end, from the file's last
    megabyte) go to ``top``: no part reads them.

    A boundary is a ``}, {"key":`` between two events. Each part is parsed as a
    complete JSON document (part 0 closed with ``]`` / ``]}``, later parts
    wrapped in ``[`` ... ``]``); a part that does not parse cleanly makes the
    caller fall back to one serial pass, so a boundary found inside a string
    can never produce wrong events. A boundary that does not advance past the
    previous one (an event longer than the gap) is skipped.
    """
    size = path.stat().st_size
    if is_gzip(path):
        return None
    with open(path, "rb") as handle:
        # where the array ends: the last "]" whose remainder closes the document and that ends an event (a
        # later array, such as Kineto's INFO lines, closes the document too); a wrong one would make the last
        # part fail to parse, and the caller fall back to one pass
        handle.seek(size - min(size, 1 << 20))
        last = handle.read()
        end = event_array_end(last, prefix)
        if end is None:
            return None
        array_end = size - len(last) + end
        if top is not None and prefix != "item":
            top.update(tail_members(last[end + 1 :]))
        cuts: list[int] = []
        for fraction in fractions:
            at = int(size * fraction)
            handle.seek(at)
            window = handle.read(1 << 16)  # events are short: a boundary is almost always this near
            match = BOUNDARY.search(window)
            if match is None:
                window += handle.read((1 << 20) - len(window))
                match = BOUNDARY.search(window)
            if match is None:
                return None
            comma = at + window.index(b",", match.start())
            if comma > (cuts[-1] if cuts else 0) and comma < array_end:
                cuts.append(comma)
    if not cuts:
        return None
    closing = b"]" if prefix == "item" else b"]}"
    plan = [(0, cuts[0], b"", closing)]
    plan += [(lo + 1, hi, b"[", b"]") for lo, hi in zip(cuts, cuts[1:] + [array_end], strict=True)]
    return plan


def _parse_part(job: tuple[str, int, int, bytes, bytes, str, bool, tuple | None, bool, str]) -> Parsed:
    """One piece with the plan's parser; a piece it cannot cut into blocks (one that starts inside a long
    event, or holds text that is not UTF-8) comes back empty with the reason as its error: the read then
    makes one serial pass, where the plan decides what reads the file (:meth:`.plan.Plan.fall_back`)."""
    path, lo, hi, head, tail, prefix, with_args, before, flows, parser = job
    part_prefix = prefix if lo == 0 else "item"
    try:
        with _RangeReader(Path(path), lo, hi, head, tail, before) as raw:
            return parse_stream(guard_json(raw, Path(path)), part_prefix, with_args, parser, flows)
    except (Unframeable, Misframed, UnicodeDecodeError) as exc:
        return Parsed.empty(next(why for kind, why in UNFRAMED.items() if isinstance(exc, kind)))


class _Claims:
    """Which pieces of a split file are still untaken: the reading process takes them from the front,
    the worker from the back, so both stay busy until they meet (whichever core runs slower)."""

    def __init__(self, context, pieces: int) -> None:
        self._lock = context.Lock()
        self._bounds = context.RawArray("q", [0, pieces])  # the untaken pieces: [front, back)

    def take(self, from_back: bool) -> int | None:
        """The next piece from one end, or ``None`` when all are taken (or the lock is never freed: a
        process that died holding it; the pieces it left are then missing and a serial pass runs)."""
        if not self._lock.acquire(timeout=CLAIM_TIMEOUT):
            return None
        try:
            front, back = self._bounds
            if front >= back:
                return None
            if from_back:
                self._bounds[1] = back - 1
                return back - 1
            self._bounds[0] = front + 1
            return front
        finally:
            self._lock.release()

    def drain(self) -> None:
        """Leave no piece to take: a piece failed, so the serial pass reads the file and both processes stop
        at their current piece (a file with one long event fails its pieces one after another)."""
        if self._lock.acquire(timeout=CLAIM_TIMEOUT):
            try:
                self._bounds[0] = self._bounds[1]
            finally:
                self._lock.release()


#: in a worker process: the claims it shares with the reading process (set by the pool's initializer)
_worker_claims: _Claims | None = None
#: in a worker process: it parsed a piece since it last handed free heap pages back
_worker_parsed = False


def _set_worker_claims(claims: _Claims) -> None:
    """The worker's initializer: the claims it shares with the reading process; and, in a worker forked
    before pandas was imported (:mod:`.early`), pyarrow kept from importing it (the pieces need no pandas)."""
    global _worker_claims
    _worker_claims = claims
    refuse_import("pandas")


def _packed(parsed: Parsed) -> bytes:
    """A piece as the worker sends it back: pickled with protocol 5, so each numpy column goes into the
    pickle as one buffer (``PickleBuffer``), not through a ``tobytes`` copy as the pool's protocol 4 does."""
    return pickle.dumps(parsed, protocol=5)


def _unpacked(data: bytes) -> Parsed:
    """A piece from :func:`_packed` (its columns writable arrays over buffers of their own)."""
    return pickle.loads(data)


def _parse_front(jobs: list[tuple], claims: _Claims, between=None) -> list[tuple[int, Parsed]]:
    """This process's share: pieces from the front of the file until none is left, ``(piece, parsed)``;
    ``between()`` after each (the worker's pieces that are ready are taken in then)."""
    done = []
    while (piece := claims.take(from_back=False)) is not None:
        done.append((piece, _parse_part(jobs[piece])))
        if between is not None:
            between()
        if done[-1][1].error:
            claims.drain()
            break  # the serial fallback will read the file again: no point in going on
    return done


def _parse_back(jobs: list[tuple]) -> tuple[int, Parsed] | None:
    """One job of the worker: the last untaken piece, or ``None`` when all are taken. Each piece goes
    back to the reading process as soon as it is parsed (the transfer overlaps the next piece)."""
    if _worker_claims is None:  # not started by start_parallel: leave every piece to the reading process
        return None
    global _worker_parsed
    piece = _worker_claims.take(from_back=True)
    if piece is None:
        if _worker_parsed:
            # out of pieces: hand the heap back before idling (not before every piece: each then faulted its
            # pages in again, ~11k of the worker's 30k faults and ~20 ms of its CPU on the 600k trace); the
            # tree's peak at the parse's end 150-180 -> 153-185 MiB, below the summary's 215-226
            _worker_parsed = False
            release_free_memory()
        return None
    _worker_parsed = True
    try:
        parsed = _parse_part(jobs[piece])
    except ImportError:  # a piece that needs pandas after all (numbers written as text): let it load
        allow_import("pandas")
        parsed = _parse_part(jobs[piece])
    if parsed.error:
        _worker_claims.drain()
    return piece, _packed(parsed)


class Workers:
    """A forked worker process parsing pieces of a split file from its end.

    This process parses pieces from the start itself (:meth:`parts`). Once the pieces are in, the worker
    ends: what it held (its heap, the pages it copied from this process) is gone before this process
    merges the parts and builds the tables, the read's peak. The description of the source (its SHA-256)
    is then made on a thread of this process (:func:`~popprof.io.sources.describe_meanwhile`), on the core
    the worker left, while this thread builds the tables.
    """

    def __init__(
        self,
        pool,
        jobs: list[tuple],
        claims: _Claims,
        futures: list,
        path: Path,
        fmt: str,
        tail: dict,
    ) -> None:
        self._pool, self._jobs, self._claims, self._futures = pool, jobs, claims, futures
        self.tail = tail  # the top-level members after the event array (the plan read them)
        self._path, self._format = path, fmt
        self._source = None
        self.why_serial = ""  # why the pieces were not used (:meth:`parts` returned None), for the plan

    def parts(self) -> list[Parsed] | None:
        """Collect the pieces in file order; ``None`` (serial fallback) when any failed or did not parse cleanly.

        Either way the worker is then told to end, and the source's description starts on a thread (an
        exception that ends the read instead leaves the worker to :meth:`close`)."""
        pieces = self._collect()
        self._pool.close(wait=False)  # it leaves after the piece it is on: the pieces are all here
        self._describe()
        return pieces

    def _collect(self) -> list[Parsed] | None:
        import concurrent.futures

        theirs: dict[int, Parsed] = {}
        # the futures are held here only: a future keeps its result (a piece's pickle) until it is dropped
        waiting, self._futures = self._futures, []

        def take_ready(wait: bool = False) -> None:  # the worker's pieces that are back
            for future in list(waiting):
                if wait or future.done():
                    waiting.remove(future)
                    if (result := future.result()) is not None:
                        theirs[result[0]] = _unpacked(result[1])
                    del future, result  # the pickle goes with its future

        try:
            done = dict(_parse_front(self._jobs, self._claims, take_ready))
            if any(part.error for part in done.values()):
                self.why_serial = next(part.error for part in done.values() if part.error)
                return None  # no need to wait for the worker's pieces (it stops at the one it is on)
            release_free_memory()  # what this process's pieces left in the heap
            take_ready(wait=True)
            done.update(theirs)
        except concurrent.futures.process.BrokenProcessPool:
            self.why_serial = "the worker process ended early"
            return None
        except (OSError, RuntimeError, TextAfterJson) as exc:
            self.why_serial = type(exc).__name__  # a piece that closed early (a cut inside nested args)
            return None
        if sorted(done) != list(range(len(self._jobs))):
            self.why_serial = "a piece was not parsed"
            return None
        if any(part.error for part in done.values()):
            self.why_serial = next(part.error for part in done.values() if part.error)
            return None  # a piece did not parse cleanly: let one serial pass find and report the problem
        return [done[piece] for piece in range(len(self._jobs))]

    def _describe(self) -> None:
        if self._source is None:
            from ...io.sources import describe_meanwhile  # not before the fork (hashlib, ~8 ms)

            self._source = describe_meanwhile(self._format, self._path)

    def source(self) -> dict[str, str]:
        """The source description (its SHA-256), made on a thread of this process after the pieces."""
        self._describe()
        try:
            return self._source()
        finally:
            self.close()

    def close(self, terminate: bool = False) -> None:
        """Shut the worker down; with ``terminate``, at once, even in the middle of a piece."""
        self._pool.close(terminate=terminate)


def start_parallel(
    path: Path,
    prefix: str,
    with_args: bool,
    fmt: str,
    before: tuple | None = None,
    head_start: int = 0,
    flows: bool = True,
    parser: str = "arrow",
) -> Workers | None:
    """Start parsing a plain file in pieces with ``parser`` on two processes; ``None`` when that cannot run
    (parallel work off, no ``fork``, a gzip file, no place to cut, or a second process or the lock the two
    share cannot be made, as without a writable ``/dev/shm``): the read then makes one pass in this process.
    Whether to split at all is the plan's choice (:mod:`.plan`).

    The worker is forked (no re-import of the caller's main module, which spawn would need) before any
    other thread of ours starts, with the objects alive at the fork frozen out of the garbage
    collector, so its collections do not copy the pages it shares with this process.
    """
    context = parallel.context(
        "fork"
    )  # None when parallel work is off (POPPROF_PARALLEL=0) or there is no fork
    if context is None:
        return None
    after_array: dict = {}  # the top-level members after the event array
    size = path.stat().st_size
    plan = _split_plan(path, prefix, _piece_fractions(size, meeting_point(size, head_start)), after_array)
    if plan is None:
        return None
    jobs = [
        (str(path), lo, hi, head, tail, prefix, with_args, before, flows, parser)
        for lo, hi, head, tail in plan
    ]
    gc.freeze()
    pool = None
    try:
        claims = _Claims(context, len(jobs))  # a semaphore: OSError where /dev/shm is missing or read-only
        pool = parallel.process_pool(1, initializer=_set_worker_claims, initargs=(claims,))
        if pool is None:
            return None
        # one job per piece: the worker takes pieces until none is left, the jobs after that return at once
        futures = [pool.submit(_parse_back, jobs) for _ in jobs]  # the first forks the worker
        return Workers(pool, jobs, claims, futures, path, fmt, after_array)
    except (OSError, RuntimeError):
        if pool is not None:
            pool.close(terminate=True)
        return None
    finally:
        gc.unfreeze()


def unify_synthetic_ids(parts: list[Parsed], numbering: dict[object, int] | None = None) -> dict[object, int]:
    """Number string pids / tids (kineto's ``"Spans"``, ...) the same way in every part, whatever the path.

    Each part numbered its string ids from ``Ids.FIRST_SYNTHETIC`` in the order it met them (which
    depends on where the part starts and how its events were batched); the final numbering follows
    the sorted labels, so one serial pass and a split parse give the same ids. Each part's columns,
    thread keys, counters and flows are rewritten to it. ``numbering`` (an earlier read's, for a pass
    that reads part of the same file again) is kept; labels it lacks follow it in sorted order.
    """
    first = Ids.FIRST_SYNTHETIC
    merged: dict[object, int] = dict(numbering or {})
    labels = sorted({label for part in parts for label in part.synthetic} - set(merged), key=str)
    start = max(merged.values(), default=first - 1) + 1
    merged.update({label: start + i for i, label in enumerate(labels)})
    for part in parts:
        if not part.synthetic:
            continue
        lut = np.empty(len(part.synthetic), dtype=np.int64)
        for label, local in part.synthetic.items():
            lut[local - first] = merged[label]
        if np.array_equal(lut, np.arange(first, first + len(lut))):
            continue  # already the merged numbering

        def one(value: int, lut: np.ndarray = lut) -> int:
            return int(lut[value - first]) if first <= value < first + len(lut) else value

        for cols in (part.x, part.b, part.flows):
            for key in ("pid", "tid") if cols else ():
                values = cols[key]
                local = (values >= first) & (values < first + len(lut))
                if local.any():
                    values = values.copy()
                    values[local] = lut[values[local] - first]
                    cols[key] = values
        part.process_names = {one(pid): name for pid, name in part.process_names.items()}
        part.thread_names = {(one(pid), one(tid)): name for (pid, tid), name in part.thread_names.items()}
        part.meta = {(key[0], *map(one, key[1:])): value for key, value in part.meta.items()}
        part.counters = [(one(row[0]), *row[1:]) for row in part.counters]
        part.synthetic = {label: merged[label] for label in part.synthetic}
    return merged


def merge(parts: list[Parsed]) -> Parsed:
    """Combine the parts of a split parse (in file order) into one."""
    if len(parts) == 1:
        return parts[0]
    names, cats = Interner(), Interner()
    xs, bs, fs = [], [], []
    flow_labels = Interner()
    out = Parsed.empty()
    for part in parts:
        name_lut = np.array([names.code(x) for x in part.names] + [-1], dtype=np.int32)
        cat_lut = np.array([cats.code(x) for x in part.cats] + [-1], dtype=np.int32)
        for cols, store in ((part.x, xs), (part.b, bs)):
            cols["name"] = name_lut[cols["name"]]
            cols["cat"] = cat_lut[cols["cat"]]
            store.append(cols)
        out.x_args.extend(part.x_args)
        out.b_args.extend(part.b_args)
        out.counters.extend(part.counters)
        out.process_names.update(part.process_names)
        out.thread_names.update(part.thread_names)
        out.skipped.update(part.skipped)
        out.warnings.update(part.warnings)
        out.parsed += part.parsed
        out.flow_count += part.flow_count
        if part.flows:
            flow_lut = np.array([flow_labels.code(x) for x in part.flow_labels] + [-1], dtype=np.int32)
            for key in ("phase", "name", "cat", "bp"):
                part.flows[key] = flow_lut[part.flows[key]]
            fs.append(part.flows)
        out.synthetic.update(part.synthetic)
        out.top.update(part.top)
        out.meta.update(part.meta)
    out.names, out.cats = names.labels, cats.labels
    out.flow_labels = flow_labels.labels
    out.flow_parts = fs  # joined when the flows table is built (most commands never read it)
    out.x, out.b = {}, {}
    for key in list(xs[0]):  # one column at a time, freeing the parts' copies as we go
        out.x[key] = np.concatenate([c.pop(key) for c in xs])
        out.b[key] = np.concatenate([c.pop(key) for c in bs])
    out.b_kind = np.concatenate([p.b_kind for p in parts])
    return out
