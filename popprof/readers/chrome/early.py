"""The split parse's worker started early: forked before the command imports pandas, so it parses while they load.

A command that will read one large plain Chrome trace (``popprof summary TRACE``) calls :func:`start` first
thing. It forks the worker of :func:`.split.start_parallel` at once; the worker takes pieces from the end of
the file while this process imports pandas and the rest of popprof (about 0.2 s), and this process joins it
from the front when :func:`.reading.read` reaches the file (:func:`adopt`). Nothing of the result depends on
when the worker started: the pieces, the plan and the merge are the split parse's, and the worker is adopted
only for the same file (its :func:`~popprof.io.files.snapshot`), the same event array and the same
``with_args`` (and whether flows are kept). Anything else (another reader claimed the path, other options,
an error before the read) leaves it to :func:`discard`, which the CLI calls when the command ends; a worker
that is not adopted is terminated there, and its work is lost, never used.

This module and everything it imports import no pandas (``tests/test_trace_early.py`` checks it).
"""

from __future__ import annotations

from pathlib import Path

from ...io import parallel, progress
from ...io.files import is_gzip, read_head, snapshot
from ...model.errors import InputError
from . import plan, split
from .sniffing import FORMAT, event_prefix, reads_args, sniff

#: the worker started for a file: ((snapshot, prefix, with_args, flows, parser), workers), until adopted or
#: discarded
_started: tuple[tuple, split.Workers] | None = None


def start(path: str | Path, *, with_args: bool = False, flows: bool = True) -> bool:
    """Fork the split parse's worker for ``path`` now when the automatic plan (:func:`.plan.choose`) reads it
    on two processes (a large plain Chrome trace); whether it did.

    Quiet on anything unusual (not a file, gzip, not a trace, too small, parallel work off): the read that
    follows finds and reports it, as it would have without this.
    """
    discard()
    path = Path(path)
    try:
        before = snapshot(path)
        if before is None or before[2] < plan.PARALLEL_MIN_BYTES or not sniff(path, read_head(path)):
            return False
        prefix = event_prefix(path)
        with_args = reads_args(path, with_args)  # as the read will
        chosen = plan.choose(
            None,
            None,
            size=before[2],
            compressed=is_gzip(path),
            with_args=with_args,
            parallel_ok=parallel.cores() >= 2,
        )
    except (OSError, ValueError, InputError):
        return False
    if chosen.workers < 2:
        return False
    progress.prepare_meter(path)  # before the fork: the worker's reads count toward the read's bar
    # the worker parses alone while this process imports pandas: the two meet before the middle
    workers = split.start_parallel(
        path, prefix, with_args, FORMAT, before, split.EARLY_HEAD_START_BYTES, flows, chosen.parser
    )
    if workers is None:
        progress.drop_prepared_meter()
        return False
    global _started
    _started = ((before, prefix, with_args, flows, chosen.parser), workers)
    return True


def adopt(
    prefix: str, with_args: bool, before: tuple | None, flows: bool = True, parser: str = "arrow"
) -> split.Workers | None:
    """The worker started early for this read (same file, event array, ``with_args``, ``flows`` and parser),
    or ``None`` (and the one started for something else is discarded)."""
    global _started
    key = (before, prefix, with_args, flows, parser)
    if _started is not None and before is not None and _started[0] == key:
        workers = _started[1]
        _started = None
        return workers
    discard()
    return None


def discard() -> None:
    """End a worker that was started early and never adopted (terminated: its pieces are not used)."""
    global _started
    if _started is not None:
        workers = _started[1]
        _started = None
        workers.close(terminate=True)
    progress.drop_prepared_meter()
