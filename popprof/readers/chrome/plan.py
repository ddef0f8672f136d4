"""Which parser reads a Chrome trace, on how many processes: one named plan, chosen here and recorded.

A read of a Chrome trace runs one :class:`Plan`: a parser and a number of processes.

- ``arrow``: blocks of plain complete and flow events through Arrow's JSON reader (:mod:`.arrow`), the
  events it does not take through orjson (the default; ``with_args`` needs every event's ``args``, so it
  reads as ``orjson``);
- ``orjson``: every block through orjson;
- ``ijson``: one event at a time through ijson (yajl2_c), which needs no framing and keeps every event
  before a defect.

``workers`` is 1 (this process) or 2 (this process and one forked worker, each taking pieces of the file
from one end: :mod:`.split`). Both are arguments of :func:`popprof.open` (``parser=``, ``workers=``), as
pandas' ``engine=`` and HTA's ``ParserBackend`` are; ``None`` means chosen here (:func:`choose`). What
ran is in the profile's metadata (:func:`metadata`): ``chrome.parser``, ``chrome.workers`` and
``chrome.plan`` (how the plan was chosen and why it changed, if it did).

The automatic plan is ``arrow`` on two processes for an uncompressed file of :data:`PARALLEL_MIN_BYTES`
or more (one process otherwise, or when parallel work is off or a second process cannot start), and
``ijson`` for a stream the block framer cannot cut (``arrow`` and ``orjson`` need whole events between
``}, {``). A parser named by the caller is never replaced: one that cannot read the file, or is not
installed, is one error line (:class:`PlanError`). Imports no pandas (:mod:`.early` uses it).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, replace

from ...model.errors import UsageError

#: the parsers, in the automatic choice's order of preference
PARSERS = ("arrow", "orjson", "ijson")
#: how many processes a read may use: this one, or this one and a forked worker
WORKERS = (1, 2)
#: the module each parser needs
_MODULES = {"arrow": "pyarrow", "orjson": "orjson", "ijson": "ijson"}
#: Files at least this large (uncompressed) are parsed on two processes when ``workers`` is not given.
PARALLEL_MIN_BYTES = 8 << 20


class PlanError(UsageError):
    """A parser or a number of processes that cannot be used (unknown, not installed, or unable to read
    the file): one line for the person who asked for it."""


@dataclass(frozen=True)
class Plan:
    """How one read runs: ``parser`` (one of :data:`PARSERS`) on ``workers`` processes (1 or 2).

    ``given``: the caller named the parser (it is then never replaced); ``note``: why the plan differs from
    what was asked or would be usual (empty when it does not)."""

    parser: str
    workers: int
    given: bool = False
    note: str = ""

    @property
    def framed(self) -> bool:
        """Whether the parser needs the stream cut into blocks of whole events (``arrow``, ``orjson``)."""
        return self.parser != "ijson"

    def with_workers(self, workers: int, why: str) -> Plan:
        """The same plan on ``workers`` processes, ``why`` noted."""
        return replace(self, workers=workers, note=_joined(self.note, why))

    def fall_back(self, why: str) -> Plan:
        """The plan after the block framer gave up: ijson, one process; an error when the parser was named."""
        if self.given:
            raise PlanError(f"parser {self.parser!r} cannot read this file ({why}); parser='ijson' can")
        return Plan("ijson", 1, False, _joined(self.note, f"ijson: {why}"))


def _joined(note: str, more: str) -> str:
    return f"{note}; {more}" if note else more


def available(parser: str) -> bool:
    """Whether the module ``parser`` needs is installed."""
    return importlib.util.find_spec(_MODULES[parser]) is not None


def check_request(parser: str | None, workers: int | None = None) -> None:
    """Raise :class:`PlanError` for a parser that is unknown or not installed, or ``workers`` other than
    ``None``, 1 and 2 (:func:`popprof.open` checks the parser before it opens any file)."""
    if parser is not None and parser not in PARSERS:
        raise PlanError(f"parser {parser!r} is not one of {', '.join(PARSERS)}")
    if workers is not None and (isinstance(workers, bool) or workers not in WORKERS):
        raise PlanError(f"workers={workers!r}: a Chrome trace is read by 1 or 2 processes")
    if parser is not None and not available(parser):
        raise PlanError(f"parser {parser!r} needs the {_MODULES[parser]} package, which is not installed")


def choose(
    parser: str | None,
    workers: int | None,
    *,
    size: int,
    compressed: bool,
    with_args: bool = False,
    parallel_ok: bool = True,
) -> Plan:
    """The plan for a file of ``size`` bytes: ``parser`` and ``workers`` as given (checked), the rest chosen.

    ``parallel_ok``: a second process may run at all (:func:`popprof.io.parallel.cores` is 2 or more and
    parallel work is on). A gzip file is read by one process (its pieces cannot be reached without
    decompressing what is before them); ``workers=2`` then runs 1, noted. Raises :class:`PlanError` for an
    unknown or unavailable parser, or a number of workers other than 1 and 2."""
    check_request(parser, workers)
    given, note = parser is not None, ""
    if parser is None:
        parser = next((p for p in PARSERS if available(p)), None)
        if parser is None:
            raise PlanError(f"no JSON parser is installed (one of {', '.join(_MODULES.values())})")
        if parser == "arrow" and with_args:
            parser, note = "orjson", "orjson: with_args keeps every event's args"
    elif parser == "arrow" and with_args:
        raise PlanError("parser 'arrow' does not keep args; with_args=True reads with 'orjson' or 'ijson'")
    chosen = workers if workers is not None else 2 if size >= PARALLEL_MIN_BYTES else 1
    plan = Plan(parser, chosen, given=given, note=note)
    if chosen == 2 and compressed:
        plan = plan.with_workers(1, "1 process: a gzip file is read from its start")
    elif chosen == 2 and not parallel_ok:
        plan = plan.with_workers(1, "1 process: parallel work is off or there is one core")
    return plan


#: the metadata keys that say how a file was read (:func:`metadata`): the only ones two plans differ in
KEYS = ("chrome.parser", "chrome.workers", "chrome.parse_parts", "chrome.plan")


def metadata(plan: Plan, parts: int) -> dict[str, object]:
    """The profile's record of what ran: ``chrome.parser``, ``chrome.workers`` (processes that parsed
    pieces), ``chrome.parse_parts`` and ``chrome.plan`` ("given" or "automatic", and any note)."""
    how = "given" if plan.given else "automatic"
    return {
        "chrome.parser": plan.parser,
        "chrome.workers": plan.workers,
        "chrome.parse_parts": parts,
        "chrome.plan": f"{how}; {plan.note}" if plan.note else how,
    }
