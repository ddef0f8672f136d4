"""Redaction: make a profile safe to share, and prove it with a leak scan.

``redact(source, out)`` reads a bundle (or anything ``popprof.open`` reads), a
Chrome trace JSON (``.json`` / ``.json.gz``) or a Poplar text summary and writes
an output of the same kind (gzip-compressed when its name ends in ``.gz``,
whatever the input's compression) in which identifiers are keyed pseudonyms, free text
is scrubbed and public vocabulary stays readable. The leak scan then reads the
output back and looks for every original it replaced and every sensitive
pattern; on a leak nothing is written and the report says which kind leaked.
See ``docs/redaction.md``.
"""

from __future__ import annotations

import gzip
import json
import os
import time
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

from .._version import __version__
from ..io.atomic import atomic_path, refuse_overwriting_inputs
from ..model.errors import InputError, UsageError
from .allowlist import Allowlist
from .policy import Policy, build_policy
from .pseudonym import KEY_ENV, check_key, key_fingerprint, load_key
from .redactor import Redactor
from .report import RedactionReport
from .scan import Scanner, ScanResult, scan_bundle, scan_text_file
from .sensitive import derive

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..model.profile import Profile


class LeakError(Exception):
    """Raised inside the atomic write when the leak scan fails, so nothing is written."""

    def __init__(self, result: ScanResult) -> None:
        super().__init__(result.summary())
        self.result = result


def input_kind(path: Path) -> str:
    """``bundle`` (and any profile popprof.open reads), ``chrome`` or ``text_summary`` (any Poplar text
    output: a summary, an out-of-memory message or a log holding them)."""
    from ..io.bounded import check_input_file
    from ..io.files import read_head

    check_input_file(path)  # missing, or a FIFO / device / socket: one line, never a blocking open
    if path.is_dir():
        return "bundle"

    if path.stat().st_size == 0:
        raise InputError(path, "the file is empty")
    head = read_head(path)
    from ..readers import chrome, oom_log, text_summary

    if chrome.sniff(path, head):
        return "chrome"
    if text_summary.sniff(path, head) or oom_log.sniff(path, head) or _poplar_text(head):
        return "text_summary"  # Poplar text output (a summary, a log): redacted as text, to text
    return "bundle"


def _poplar_text(head: bytes) -> bool:
    """Text whose head holds a heading of Poplar's summary (a part of one: ``By Tile (Excluding Gaps):``)."""
    from .names import summary_label

    if b"\x00" in head[:4096]:
        return False
    lines = head.decode("utf-8", "replace").splitlines()[:200]
    return any(line.strip().endswith(":") and summary_label(line.strip()[:-1].rstrip()) for line in lines)


def gzipped_name(out: Path) -> bool:
    """Whether an output is written gzip-compressed: its name ends in ``.gz`` (as every command's ``-o``),
    whatever the input was."""
    return out.name.lower().endswith(".gz")


def check_paths(source: Path, out: Path) -> None:
    """Refuse an output that is the input, sits inside it, or contains it."""
    refuse_overwriting_inputs(out, [source])


def _as_key(key: bytes | str | None, key_file: str | os.PathLike[str] | None) -> tuple[bytes, str]:
    if key is not None:
        data = key.encode("utf-8") if isinstance(key, str) else bytes(key)
        check_key(data, "the key given to redact()")
        return data, "given"
    return load_key(key_file)


def _source_path(source: object) -> Path:
    """The path to redact: ``source`` itself, or the file a Profile was read from; else one-line TypeError."""
    from ..model.profile import Profile

    if isinstance(source, str | os.PathLike):
        return Path(source)
    if isinstance(source, Profile):
        origin = str(source.source or "")
        if origin and Path(origin).exists():
            return Path(origin)
        raise TypeError(
            f"redact() redacts the file a Profile was read from, and Profile {source.name!r} was not read from "
            f"one ({'source is empty' if not origin else origin + ' no longer exists'}): write it with "
            "popprof.export(profile, 'run.popprof') and redact that"
        )
    raise TypeError(
        "redact() takes the path of a bundle, a trace (.json/.json.gz) or a Poplar text summary, or a Profile "
        f"read from one, not {type(source).__name__}"
    )


def redact(
    source: str | os.PathLike[str] | Profile,
    out: str | os.PathLike[str],
    key: bytes | str | None = None,
    policy: Policy | None = None,
    mapping_out: str | os.PathLike[str] | None = None,
    scan: bool = True,
    *,
    key_file: str | os.PathLike[str] | None = None,
    report_out: str | os.PathLike[str] | None = None,
    allowlist: Allowlist | None = None,
    on_read: Callable[[Profile], None] | None = None,
) -> RedactionReport:
    """Redact ``source`` into ``out`` (same kind as the input; a bundle for profile inputs).

    ``key``: bytes or text; default from ``key_file``, else ``$POPPROF_REDACT_KEY``, else a
    random key per run (the output is then unlinkable to any other). With ``scan`` (the
    default) the output is leak-scanned before it is put in place; on a leak nothing is
    written and the report's ``scan["passed"]`` is false. ``mapping_out`` writes the
    pseudonym -> original map (sensitive: keep it private).

    ``source`` may be a :class:`~popprof.model.profile.Profile`: the file it was read from
    (``profile.source``) is redacted, so changes made to the Profile in memory are not in ``out``.
    ``on_read`` is called with each profile read from an input that becomes a bundle (the CLI says there what
    the reader worked around, e.g. a rank's trace cut off); a trace or text summary is redacted as bytes.
    """
    source, out = _source_path(source), Path(out)
    kind = input_kind(source)
    check_paths(source, out)
    for extra, what in ((mapping_out, "--mapping-out"), (report_out, "--report")):
        if extra is not None:
            check_paths(source, Path(extra))
            if Path(extra).resolve() == out.resolve() or out.resolve() in Path(extra).resolve().parents:
                raise UsageError(f"{what} must not be the output or sit inside it")
    key_bytes, key_source = _as_key(key, key_file)
    policy = policy or build_policy()
    redactor = Redactor(key_bytes, policy, allowlist)
    started = time.perf_counter()
    scan_result: ScanResult | None = None
    bytes_in = bytes_out = 0
    try:
        if kind == "chrome":
            bytes_in, bytes_out, scan_result = _redact_chrome(source, out, redactor, scan)
        elif kind == "text_summary":
            bytes_in, bytes_out, scan_result = _redact_text(source, out, redactor, scan)
        else:
            bytes_in, bytes_out, scan_result = _redact_bundle(source, out, redactor, scan, on_read)
    except LeakError as exc:
        scan_result = exc.result
    report = RedactionReport(
        input=f"<{kind} input>",
        output=str(out),
        input_kind=kind,
        key_source=key_source,
        tool_version=__version__,
        policy=policy.describe(),
        replaced=redactor.replaced_counts(),
        kept_public=dict(redactor.kept),
        dropped=list(redactor.dropped),
        scan=None if scan_result is None else scan_result.to_dict(),
        bytes_in=bytes_in,
        bytes_out=bytes_out,
        seconds=round(time.perf_counter() - started, 3),
        key_fingerprint=redactor.key_fingerprint,
    )
    if report.passed and mapping_out is not None:  # as sensitive as the input: owner-only, whatever the umask
        with atomic_path(mapping_out, mode=0o600) as tmp:
            tmp.write_text(json.dumps(redactor.pseudonyms.mapping(), indent=1, ensure_ascii=False), "utf-8")
    if report_out is not None:
        report.write(report_out)
    return report


def _scanner(source: Path, kind: str, redactor: Redactor) -> Scanner:
    """A scanner whose sensitive set is derived from the ORIGINAL alone (never from the redactor's
    record of what it replaced); it shares only the public vocabulary and the keep patterns."""
    return Scanner(derive(source, kind, redactor.policy.keeps))


def _finish_scan(source: Path, kind: str, redactor: Redactor, run) -> ScanResult:
    scanner = _scanner(source, kind, redactor)
    run(scanner)
    if not scanner.result.passed:
        raise LeakError(scanner.result)
    return scanner.result


def _redaction_record(redactor: Redactor) -> dict:
    return {
        "redacted": True,
        "policy": redactor.policy.describe(),
        "tool": "popprof",
        "tool_version": __version__,
        "pseudonyms": "HMAC-SHA-256, keyed",
        "key_fingerprint": redactor.key_fingerprint,
    }


def _redact_bundle(
    source: Path, out: Path, redactor: Redactor, scan: bool, on_read: Callable[[Profile], None] | None = None
):
    from ..readers import bundle as bundle_io
    from ..readers import open_all
    from .bundle import redact_profile, redact_sources

    profiles = open_all(source)
    for profile in profiles.values() if on_read is not None else ():
        on_read(profile)
    single = len(profiles) == 1
    result = None
    with bundle_io.output_directory(out) as tmp:
        for engine, profile in profiles.items():
            redacted = redact_profile(profile, redactor)
            try:
                sources = json.loads(profile.meta.get("source_files", "[]"))
            except ValueError:
                sources = []
            sources = redact_sources(sources if isinstance(sources, list) else [], redactor)
            target = tmp if single else tmp / f"{redactor.identifier('profile', engine)}.popprof"
            bundle_io.write(
                redacted, target, redaction=_redaction_record(redactor), sources=sources, protect=[source]
            )
        if scan:
            result = _finish_scan(source, "bundle", redactor, lambda s: scan_bundle(tmp, s))
        size = sum(p.stat().st_size for p in tmp.rglob("*") if p.is_file())
    return _size(source), size, result


def _redact_chrome(source: Path, out: Path, redactor: Redactor, scan: bool):
    from ..io.heap import gc_paused
    from .background import Derivation, OutputStrings

    gz = gzipped_name(out)  # the output's name decides, not the input's compression
    # the scan's two halves run beside the redaction, each on a process of its own: what is sensitive
    # is derived from the original (its own read), and the output's strings are found in the bytes as
    # they are written (its own cutting and tokenizing); they meet only when both are done
    with gc_paused():  # inherited by the forked halves
        sensitive = Derivation(source, "chrome", redactor.policy.keeps) if scan else None
        collector = OutputStrings() if scan else None
        try:
            return _redact_chrome_with(source, out, redactor, gz, sensitive, collector)
        finally:
            for helper in (sensitive, collector):
                if helper is not None:
                    helper.cancel()


def _redact_chrome_with(source: Path, out: Path, redactor: Redactor, gz: bool, sensitive, collector):
    import concurrent.futures

    from ..io.parallel import thread_pool
    from .secrets_scan import detector

    loaded = None
    if sensitive is not None:  # load the second detector (detect-secrets' import) while the trace is redacted
        loader = thread_pool(1)
        loaded = loader.submit(detector)
        loader.shutdown(wait=False)
    try:
        return _redact_and_scan(source, out, redactor, gz, sensitive, collector, loaded)
    finally:
        if loaded is not None:
            # the import ends before this call does, even when the input failed early: a library it imports can
            # change the warning filters as it is imported (requests silences a urllib3 warning that way), and
            # from a thread still importing after the CLI's warnings context has closed, the warning showed
            concurrent.futures.wait([loaded])


def _redact_and_scan(source: Path, out: Path, redactor: Redactor, gz: bool, sensitive, collector, loaded):
    """The redaction of a trace into ``out`` and, with ``sensitive``, its leak scan (``loaded``: the detector)."""
    from ..io.progress import progress
    from .chrome import (
        NOT_JSON,
        InvalidString,
        check_strings,
        damaged_trace,
        first_damage,
        locate_in_trace,
        redact_chrome,
        scan_chrome,
    )

    if sensitive is None and (where := first_damage(source)) is not None:  # --no-scan: no helper looks
        raise damaged_trace(source, where)
    result = None
    with atomic_path(out) as tmp:
        with progress("redacting trace", total=source.stat().st_size) as advance:
            try:
                bytes_in, bytes_out = redact_chrome(
                    source,
                    tmp,
                    redactor,
                    gz,
                    advance,
                    # with the scan's helper processes running, the two cores are busy: no encoding threads
                    workers=1 if sensitive is not None and sensitive.process is not None else 2,
                    sink=None if collector is None else collector.feed,
                )
            except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
                raise InputError(
                    source, f"corrupt or truncated gzip data ({exc})", "re-copy the file; it may be truncated"
                ) from None
            except (InputError, InvalidString) as exc:
                # text after the JSON value, or no closing bracket: a bracket flipped inside the file reads
                # so too; a string whose escape a flipped byte broke; the damage, where the JSON is first
                # invalid, is the cause to name
                if sensitive is not None:
                    sensitive.result()
                where = sensitive.damage if sensitive is not None else None
                if where is None:
                    where = first_damage(source, locate=True)
                if where is not None:
                    raise damaged_trace(source, where) from None
                if isinstance(exc, InvalidString):  # the parser found no damage: still never copied through
                    raise InputError(
                        source, "a JSON string holds an invalid escape sequence: it would not be redacted"
                    ) from None
                raise
        if sensitive is not None:
            strings = collector.close()
            loaded.result()
            found = sensitive.result()
            where = sensitive.damage  # text that is not UTF-8
            if where is None and strings is not None and NOT_JSON in strings:  # text outside strings not JSON
                where = first_damage(source, locate=True)
            # before the scan: never a leak blamed on the policy, never invalid JSON out
            if where is not None:
                raise damaged_trace(source, where)
            scanner = Scanner(found)
            if strings is None:  # the output scan's process failed: read the written file instead
                scan_chrome(tmp, scanner, place=out.name)
            else:
                check_strings(strings, scanner, set(), out.name)
            if not scanner.result.passed:
                # a leak in the output of an input valid as UTF-8: damage that kept it so (a '{' read as 'ń')
                # is the cause to name, never the policy
                if (where := first_damage(source, locate=True)) is not None:
                    raise damaged_trace(source, where)
                locate_in_trace(tmp, dict(scanner.hits), scanner.result)
                raise LeakError(scanner.result)
            result = scanner.result
    return bytes_in, bytes_out, result


def _redact_text(source: Path, out: Path, redactor: Redactor, scan: bool):
    from ..io.files import open_binary
    from .text_summary import redact_text_summary

    with open_binary(source) as handle:
        data = handle.read()
    text = data.decode("utf-8", "replace")
    redacted = redact_text_summary(text, redactor).encode("utf-8")
    if gzipped_name(out):  # no file name and no time in the header: only the text is written
        redacted = gzip.compress(redacted, compresslevel=6, mtime=0)
    result = None
    with atomic_path(out) as tmp:
        tmp.write_bytes(redacted)
        if scan:
            result = _finish_scan(
                source, "text_summary", redactor, lambda s: scan_text_file(tmp, s, out.name)
            )
    return len(data), len(redacted), result


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def scan(
    path: str | os.PathLike[str], against: str | os.PathLike[str], policy: Policy | None = None
) -> ScanResult:
    """Leak-scan ``path`` (a redacted output) against ``against`` (its original), which is read
    again on its own to derive what is sensitive; detectors also run on the output alone."""
    path, against = Path(path), Path(against)
    if not path.exists():
        raise InputError(path, "no such file or directory")
    kind = input_kind(against)
    policy = policy or build_policy()
    if not path.is_dir() and input_kind(path) == "chrome":
        return _scan_trace_against(path, against, kind, policy)
    scanner = Scanner(derive(against, kind, policy.keeps))
    if path.is_dir():
        return scan_bundle(path, scanner)
    return scan_text_file(path, scanner)


def _scan_trace_against(path: Path, against: Path, kind: str, policy: Policy) -> ScanResult:
    """The output's strings are read here while a forked process derives the original's sensitive set."""
    from .background import Derivation
    from .chrome import check_strings, locate_in_trace, trace_strings

    derivation = Derivation(against, kind, policy.keeps)
    try:
        strings = trace_strings(path)
        scanner = Scanner(derivation.result())
    finally:
        derivation.cancel()
    check_strings(strings, scanner, set(), path.name)
    if not scanner.result.passed:
        locate_in_trace(path, dict(scanner.hits), scanner.result)
    return scanner.result


__all__ = [
    "KEY_ENV",
    "LeakError",
    "Policy",
    "RedactionReport",
    "ScanResult",
    "build_policy",
    "check_paths",
    "input_kind",
    "key_fingerprint",
    "redact",
    "scan",
]
