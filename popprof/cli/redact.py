"""``popprof redact`` and ``popprof scan``: redaction with a leak scan, and the scan on its own."""

from __future__ import annotations

import os
from pathlib import Path

import click

from ..io.atomic import refuse_overwriting_inputs
from ..model.errors import UsageError
from .common import (
    check_output,
    config_option,
    global_options,
    is_stdout,
    output_option,
    report_read_warnings,
    require_inputs,
    said_wrote,
)


def _config_option():
    """``--config FILE`` as every command has it; for redaction only its ``[redact]`` table counts, and
    without it only the project's own configuration (at the git root) is read, never one further up."""
    return config_option(
        help="Config file whose [redact] table is the policy (default: the project's popprof.toml or "
        "pyproject.toml at the git root, never one further up)."
    )


@click.command("redact")
@click.argument("source", metavar="IN", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    "out",
    required=True,
    type=click.Path(path_type=Path),
    help="Output path (a bundle directory, a .json/.json.gz trace or a text file: same kind as IN; "
    "gzip-compressed when it ends in .gz).",
)
@click.option(
    "--key-file",
    type=click.Path(path_type=Path),
    default=None,
    help="File holding the secret key (else $POPPROF_REDACT_KEY, else a random key per run).",
)
@click.option(
    "--keep", multiple=True, metavar="PAT", help="Keep values matching PAT readable (glob, or re:REGEX)."
)
@click.option(
    "--drop",
    multiple=True,
    metavar="PAT",
    help="Drop table:NAME, column:TABLE.COL or metadata.KEY (globs allowed).",
)
@click.option(
    "--policy",
    "policy_file",
    type=click.Path(path_type=Path),
    default=None,
    help="Policy TOML file (keep, drop, [scrub] families).",
)
@click.option(
    "--mapping-out",
    type=click.Path(path_type=Path),
    default=None,
    help="Write the pseudonym -> original map here (SENSITIVE: keep it private).",
)
@_config_option()
@click.option("--no-scan", is_flag=True, help="Skip the leak scan (not recommended).")
@click.option(
    "--report",
    "report_out",
    type=click.Path(path_type=Path),
    default=None,
    help="Write a JSON report of what was replaced, by kind and count.",
)
@global_options
def redact_command(
    source: Path,
    out: Path,
    key_file: Path | None,
    keep: tuple[str, ...],
    drop: tuple[str, ...],
    policy_file: Path | None,
    mapping_out: Path | None,
    config_file: Path | None,
    no_scan: bool,
    report_out: Path | None,
) -> None:
    """Redact a profile so it can be shared; the leak scan then proves nothing sensitive remains.

    IN is a bundle (or anything `popprof export` reads: it becomes a redacted bundle), a Chrome
    trace JSON (.json/.json.gz, written as a trace) or a Poplar text summary (text); a trace or text
    output is gzip-compressed when its name ends in .gz.
    Identifiers become keyed pseudonyms (var_3f9a2c1b); public vocabulary stays readable;
    paths, users, hosts, emails, IPs, URLs with credentials, tokens and environment values in
    free text are replaced. On a leak nothing is written and the exit code is 1.

    \b
    Examples:
      popprof redact run.popprof -o run.redacted.popprof --key-file team.key
      popprof redact trace.json.gz -o trace.redacted.json.gz --report redaction.json
      popprof redact summary.txt -o summary.redacted.txt --keep 'MyLib::*'
      popprof redact trace.json -o shared.json --config team/popprof.toml   # its [redact] policy

    The policy comes from the command line, --policy FILE, --config FILE's [redact] table, or the
    project's own popprof.toml / pyproject.toml at the root of the git repository you are in (never
    one further up); a policy that keeps more readable is always said on stderr.
    """
    require_inputs(source)  # before the redaction's imports: a missing file is said at once
    from ..redaction import build_policy, check_paths, input_kind, redact
    from ..redaction.pseudonym import KEY_ENV

    if report_out is not None and report_out.resolve() == out.resolve():
        raise UsageError("--report must differ from the output")
    if report_out is not None and mapping_out is not None and report_out.resolve() == mapping_out.resolve():
        raise UsageError("--report and --mapping-out must be different files (one would overwrite the other)")
    for written in (
        out,
        mapping_out,
        report_out,
    ):  # the key and the policy are inputs too: never overwrite them
        if written is not None:
            refuse_overwriting_inputs(written, [key_file, policy_file, config_file])
    policy = build_policy(policy_file, keep, drop, config_file=config_file)
    for note in policy.loosened:  # a policy that keeps more readable is always said, wherever it came from
        click.echo(f"popprof: note: {note}", err=True)
    input_kind(source)
    check_paths(source, out)
    if key_file is None and not os.environ.get(KEY_ENV, "").strip():
        click.echo(
            f"popprof: note: no key given (--key-file or ${KEY_ENV}): using a random key for this run, so "
            "these pseudonyms cannot be linked to any other redaction",
            err=True,
        )
    report = redact(
        source,
        out,
        policy=policy,
        mapping_out=mapping_out,
        scan=not no_scan,
        key_file=key_file,
        report_out=report_out,
        on_read=report_read_warnings,
    )
    if not report.passed:
        click.echo(
            f"popprof: error: {leak_message(report.scan)}; nothing was written to {out} (check the "
            "policy: a scrubber may be switched off, or a --keep pattern is too broad)",
            err=True,
        )
        raise click.exceptions.Exit(1)
    if mapping_out is not None:
        click.echo(
            f"popprof: warning: {mapping_out} maps pseudonyms back to the original names: it is as "
            "sensitive as the input; do not share it",
            err=True,
        )
    if no_scan:
        click.echo("popprof: warning: leak scan skipped (--no-scan)", err=True)
    click.echo(report.summary())


def leak_message(scan: dict, report_option: bool = True) -> str:
    """One line naming each leak's kind and where it is (JSON path, table/column/row, line), never the
    value. ``report_option``: the command has ``--report`` (``scan`` has not), so the message may name it."""
    kinds = ", ".join(f"{k} ({n})" for k, n in sorted(scan["leaked_kinds"].items()))
    located = scan.get("locations") or []
    if located:
        shown = "; ".join(f"{loc['kind']} at {loc['where']}" for loc in located[:8])
        where = "in --report" if report_option else "not shown"
        more = f"; {len(located) - 8} more places {where}" if len(located) > 8 else ""
        return f"leak scan FAILED: sensitive {kinds}: {shown}{more}"
    places = sorted({p for v in scan["where"].values() for p in v})[:6]
    return f"leak scan FAILED: sensitive {kinds} in {', '.join(places)}"


@click.command("scan")
@click.argument("path", metavar="PATH", type=click.Path(path_type=Path))
@click.option(
    "--against",
    "original",
    required=True,
    type=click.Path(path_type=Path),
    help="The original (unredacted) input the output was made from.",
)
@click.option(
    "--policy",
    "policy_file",
    type=click.Path(path_type=Path),
    default=None,
    help="Policy TOML file (its keep patterns are honoured).",
)
@click.option("--keep", multiple=True, metavar="PAT", help="Values matching PAT were kept on purpose.")
@_config_option()
@output_option("the scan report (JSON: kinds and places of leaks, never values)")
@global_options
def scan_command(
    path: Path,
    original: Path,
    policy_file: Path | None,
    keep: tuple[str, ...],
    config_file: Path | None,
    output: Path | None,
) -> None:
    """Leak-scan a redacted output against its original; exit 1 when anything sensitive remains.

    Every string of PATH is checked for every sensitive token of ORIGINAL (the names and
    free-text values a redaction replaces) and for sensitive patterns; the report names the
    kinds that leaked and where, never the values.

    \b
    Examples:
      popprof scan run.redacted.popprof --against run.popprof
      popprof scan shared.json --against trace.json -o scan.json   # the report, also when it fails
    """
    from ..redaction import build_policy, scan

    check_output(output, [path, original, policy_file, config_file])
    policy = build_policy(policy_file, keep, config_file=config_file)
    for note in policy.loosened:
        click.echo(f"popprof: note: {note}", err=True)
    result = scan(path, original, policy)
    if output is not None:
        _write_scan_report(result, output)
    if not result.passed:
        click.echo(f"popprof: error: {leak_message(result.to_dict(), report_option=False)}", err=True)
        raise click.exceptions.Exit(1)
    click.echo(result.summary(), err=output is not None and is_stdout(output))


def _write_scan_report(result, output: Path) -> None:
    """The scan's report as JSON (:meth:`.ScanResult.to_dict`: kinds and places, never a value): on stdout
    for ``-`` (then the summary line goes to stderr), else written atomically and said on stderr."""
    import json

    from ..io.atomic import write_text_atomic

    text = json.dumps({"scan": result.to_dict()}, indent=1) + "\n"
    if is_stdout(output):
        click.echo(text, nl=False)
        return
    write_text_atomic(output, text)
    said_wrote(output)
