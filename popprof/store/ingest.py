"""``store add``: put runs into a store, append-only and idempotent.

For each profile of each source: compute the content hash (the tables as declared Arrow, the baseline
metrics, and the identity given: time, commit, branch, labels); the same (run_id, profile) with the same
hash is a no-op, with another hash a conflict unless ``replace``. Table, ``metrics``, ``ranks``, ``findings``
and ``account`` files are written first and the catalogue row last, each to a temporary name renamed when
complete: a crash leaves only files no view shows (``store fsck`` lists them). Concurrent adds of different
runs write disjoint files.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import io
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from .. import metrics as registry
from .._version import __version__
from ..compare.baseline import baseline_document, is_baseline
from ..model.errors import InputError, PopprofError, UsageError, display_path
from ..model.profile import Profile
from ..readers import bundle as bundle_reader
from ..readers.baseline import BASELINE_FORMAT, read_baseline
from . import bundles
from . import identity as ident
from .catalogue import known_profiles, stored_rows, write_parquet, write_row
from .judged import account_frame, findings_frame, limit_entry, rules_hash
from .layout import COMPACT_PREFIX, PENDING, Location, read_descriptor, run_file, run_key
from .ranks import rank_table
from .schemas import METRICS, table_kind, to_arrow


class StoreConflict(PopprofError):
    """The run is stored already with other content (exit 2; ``--replace`` overwrites it)."""


@dataclass(frozen=True)
class AddResult:
    """What ``add`` did with one profile: ``added``, ``unchanged`` or ``replaced``."""

    run_id: str
    profile: str
    status: str
    month: str
    ingest_id: str
    #: True when the store held no earlier run of this profile: the run starts a new series (``trend`` and
    #: ``diff`` compare runs of one profile name; ``profile=`` / ``--profile`` pins it)
    new_series: bool = False


@dataclass
class _Plan:
    profile: Profile
    kind: str
    manifest: dict
    created: dt.datetime
    tables: dict[str, pa.Table]
    metrics: list[dict]
    content: str
    source: Path = Path()
    run_id: str = ""
    #: the profile's name in its source (before ``--profile`` renames it)
    key: str = ""
    #: whether the rules judge a read of the source with its events' arguments (as ``popprof check`` reads a
    #: trace recording shapes or collectives' sizes), not the read the store keeps
    with_args: bool = False


def add(
    store: str | os.PathLike[str],
    sources: Iterable[str | os.PathLike[str]],
    *,
    run_id: str | None = None,
    commit: str | None = None,
    branch: str | None = None,
    time: str | dt.datetime | None = None,
    labels: Mapping[str, str] | None = None,
    replace: bool = False,
    reader_options: Mapping[str, object] | None = None,
    env: Mapping[str, str] | None = None,
    keep_bundle: bool = False,
    profile: str | None = None,
    on_read: Callable[[Profile], None] | None = None,
    config: Mapping | None = None,
) -> list[AddResult]:
    """Add every profile of ``sources`` (anything popprof opens, or a baseline JSON) as runs of ``store``.

    ``run_id``/``commit``/``branch`` default from the CI environment (``env``, else ``os.environ``); without
    a run id the first 16 hex digits of the content hash name the run. ``keep_bundle`` keeps each added run's
    bundle in the store (:mod:`.bundles`). ``profile`` pins the series key (the profile name, else taken from
    the file or bundle name), so a renamed artefact continues its series; a source holding several profiles
    cannot take one name. ``on_read`` is called with each profile read, before anything is written (the CLI
    says there what the reader worked around: a trace cut off is added with its events up to the cut). Each
    result says whether it starts a new series. Each run written gets its ``findings`` (the rules as ``popprof
    check`` runs them with ``config``'s ``[rules]``, else the defaults) and its time ``account``
    (:mod:`.judged`); they are derived, not part of the content hash, so an unchanged re-add keeps the
    findings its first add judged. Raises :class:`StoreConflict` (before
    writing anything) when a run is stored with other content and ``replace`` is false.
    """
    location = Location.of(store)
    read_descriptor(location)
    who = ident.resolve(run_id, commit, branch, labels or {}, env)
    when = ident.parse_time(time) if isinstance(time, str) else time
    if profile is not None and not profile.strip():
        raise UsageError("--profile: an empty name")
    rules_hash(config)  # a bad [rules] table is one line before any source is read
    plans: list[_Plan] = []
    for source in sources:
        plans += _load(Path(source), who, when, dict(reader_options or {}), profile)
    if on_read is not None:
        for plan in plans:
            on_read(plan.profile)
    series = known_profiles(location, {plan.profile.name for plan in plans})
    seen: set[tuple[str, str]] = set()
    decisions = []
    for plan in plans:
        plan.run_id = who.run_id if who.run_id is not None else plan.content[:16]
        key = (plan.run_id, plan.profile.name)
        if key in seen:
            raise UsageError(
                f"run {plan.run_id!r} gets profile {plan.profile.name!r} twice from these sources; "
                "add them with different --run-id"
            )
        seen.add(key)
        old = stored_rows(location, *key)
        live = old[0] if old else None
        if live is not None and live["content_sha256"] != plan.content and not replace:
            raise StoreConflict(
                f"{location.root}: run {plan.run_id!r} profile {plan.profile.name!r} is stored with other "
                "content; pass --replace to overwrite it, or give another --run-id"
            )
        decisions.append((plan, live, {r["ingest_id"] for r in old}))
    results = []
    judged: dict[Path, dict[str, Profile]] = {}
    for plan, live, before in decisions:
        if live is not None and live["content_sha256"] == plan.content:
            results.append(
                AddResult(
                    plan.run_id,
                    plan.profile.name,
                    "unchanged",
                    ident.month_of(live["created"]),
                    live["ingest_id"],
                )
            )
            continue
        judge = _judge(plan, judged, dict(reader_options or {}))
        result = _write(
            location,
            plan,
            who,
            replaced=live,
            keep_bundle=keep_bundle,
            before=before,
            config=config,
            judge=judge,
        )
        new = plan.profile.name not in series
        series.add(plan.profile.name)  # the next profile of this add with the name continues the series
        results.append(dataclasses.replace(result, new_series=new))
    return results


def _judge(plan: _Plan, judged: dict[Path, dict[str, Profile]], options: dict) -> Profile:
    """The profile the rules and the time account read: the plan's own, or for a trace recording its events'
    arguments the same source read with them (once per source, held in ``judged`` while its plans are
    written), as ``popprof check`` and ``popprof query``'s analysis tables read it; the store's tables stay
    the read without them. When that second read fails, a warning, and the plan's own profile is judged."""
    if not plan.with_args:
        return plan.profile
    from ..readers import open_all

    if plan.source not in judged:
        judged.clear()  # one source's second read held at a time (the plans come source by source)
        try:
            judged[plan.source] = open_all(plan.source, **dict(options, with_args=True))
        except PopprofError as exc:  # the read the store keeps worked: judge that one, and say so
            import warnings

            judged[plan.source] = {}
            warnings.warn(
                f"{display_path(plan.source)}: not read with its events' arguments ({exc}); its findings "
                "are judged without them (as check --no-shapes)",
                stacklevel=4,
            )
    judge = judged[plan.source].get(plan.key)
    if judge is None:
        return plan.profile
    judge.name = plan.profile.name
    return judge


def _load(
    path: Path, who: ident.Identity, when: dt.datetime | None, options: dict, pin: str | None = None
) -> list[_Plan]:
    """Open one source into plans (one per profile); ``pin`` names the profile (one profile only)."""
    from ..readers import open_all

    profiles = {"": read_baseline(path)} if _is_baseline_file(path) else open_all(path, **options)
    if pin is not None and len(profiles) > 1:
        raise UsageError(
            f"{display_path(path)} holds {len(profiles)} profiles; --profile names one series: "
            "add them one at a time"
        )
    from ..readers.chrome.sniffing import source_records

    with_args = "with_args" not in options and source_records(path)
    plans = []
    for key, profile in profiles.items():
        if pin is not None:
            profile.name = pin
        manifest, kind = _manifest(profile, path)
        created = when or _created(manifest, path)
        tables = {name: to_arrow(table_kind(name), frame) for name, frame in profile.tables.items()}
        document = baseline_document(profile)
        metrics = [
            {"name": name, "value": float(entry["value"]), "unit": entry["unit"], "better": _better(name)}
            for name, entry in sorted(document["metrics"].items())
        ]
        content = _content_hash(profile.name, kind, tables, metrics, created, who)
        plans.append(
            _Plan(
                profile,
                kind,
                dict(manifest, target=document["target"]),
                created,
                tables,
                metrics,
                content,
                path,
                key=key,
                with_args=with_args,
            )
        )
    return plans


def _is_baseline_file(path: Path) -> bool:
    if not path.is_file() or path.suffix.lower() != ".json":
        return False
    try:
        with path.open("rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return BASELINE_FORMAT.encode() in head


def _manifest(profile: Profile, path: Path) -> tuple[dict, str]:
    """The bundle manifest (or what stands for it) and the run kind (``profile`` or ``baseline``)."""
    if is_baseline(profile):
        return (
            {
                "format": BASELINE_FORMAT,
                "format_version": int(profile.meta.get("baseline.format_version", 1)),
                "tool_version": profile.meta.get("baseline.tool_version", ""),
                "profile_name": profile.name,
                "tables": json.loads(profile.meta.get("baseline.tables", "[]")),
            },
            "baseline",
        )
    source = Path(str(profile.source)) if profile.source else path
    if source.is_dir() and (source / bundle_reader.MANIFEST).is_file():
        return bundle_reader.read_manifest(source), "profile"
    try:
        sources = json.loads(profile.meta.get("source_files", "[]"))
    except json.JSONDecodeError:
        sources = []
    return (
        {
            "format": bundle_reader.BUNDLE_FORMAT,
            "format_version": bundle_reader.FORMAT_VERSION,
            "tool_version": __version__,
            "profile_name": profile.name,
            "source_format": profile.source_format,
            "sources": sources,
            "redacted": {"redacted": False},
        },
        "profile",
    )


def _created(manifest: dict, path: Path) -> dt.datetime:
    """The run's own time: the bundle's ``created``, else the source's modification time (stable on re-add)."""
    text = manifest.get("created")
    if isinstance(text, str):
        try:
            return ident.parse_time(text)
        except UsageError:
            pass
    try:
        return dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC).replace(microsecond=0)
    except OSError as exc:
        raise InputError(path, f"cannot read ({exc.strerror})") from None


def _better(name: str) -> str | None:
    described = registry.describe(name)
    return described.better if described else None


def _content_hash(
    profile: str,
    kind: str,
    tables: dict[str, pa.Table],
    metrics: list[dict],
    created: dt.datetime,
    who: ident.Identity,
) -> str:
    """SHA-256 over the declared tables (Arrow IPC), the metrics and the identity given (not the run id)."""
    digest = hashlib.sha256()
    header = {
        "profile": profile,
        "kind": kind,
        "created": created.isoformat(),
        "commit": who.commit,
        "branch": who.branch,
        "labels": who.labels,
        "metrics": metrics,
    }
    digest.update(json.dumps(header, sort_keys=True).encode())
    for name in sorted(tables):
        digest.update(b"\0" + name.encode() + b"\0")
        sink = io.BytesIO()
        with pa.ipc.new_stream(sink, tables[name].schema) as writer:
            writer.write_table(tables[name])
        digest.update(sink.getvalue())
    return digest.hexdigest()


def _keyed(table: pa.Table, run_id: str, profile: str, ingest_id: str) -> pa.Table:
    for name, value in (("run_id", run_id), ("profile", profile), ("ingest_id", ingest_id)):
        index = table.schema.get_field_index(name)
        table = table.set_column(index, name, pa.array([value] * table.num_rows, pa.string()))
    return table


def _write(
    location: Location,
    plan: _Plan,
    who: ident.Identity,
    replaced: dict | None,
    keep_bundle: bool = False,
    before: set[str] | frozenset[str] = frozenset(),
    config: Mapping | None = None,
    judge: Profile | None = None,
) -> AddResult:
    """Write one run: a pending marker, tables, metrics, ranks, findings, account (and the kept bundle), the
    catalogue row last; then check that the run is still what this add wrote (:func:`_check_written`),
    withdrawing it when not.

    ``before``: the ingest ids of the run's catalogue rows when the add was planned; a row of another ingest
    that appeared since is a concurrent add of other content. ``config``: the rule settings of the findings;
    ``judge``: the profile the findings and the account are of (default the plan's, :func:`_judge`).
    """
    import pandas as pd

    name = plan.profile.name
    # derived before the first file: a rule failing leaves nothing behind
    derived = {
        "ranks": pd.DataFrame(rank_table(plan.profile, who.labels.get("host"))),
        "findings": findings_frame(judge or plan.profile, config),
        "account": account_frame(judge or plan.profile),
    }
    limit = limit_entry(judge or plan.profile)
    ingest_id = hashlib.sha256(f"{plan.run_id}\0{name}\0{plan.content}".encode()).hexdigest()[:16]
    key = run_key(plan.run_id, name)
    month = ident.month_of(plan.created)
    marker = f"{PENDING}/{ingest_id}.json"
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    location.write_bytes(marker, json.dumps({"started": started, "pid": os.getpid()}).encode())
    written: list[str] = []
    try:
        for table, data in plan.tables.items():
            rel = run_file(table_kind(table), month, key, ingest_id)
            write_parquet(location, rel, _keyed(data, plan.run_id, name, ingest_id))
            written.append(rel)
        constants = {"run_id": plan.run_id, "profile": name, "created": plan.created, "ingest_id": ingest_id}
        metrics = pa.Table.from_pylist([dict(m, **constants) for m in plan.metrics], schema=METRICS)
        rel = run_file("metrics", month, key, ingest_id)
        write_parquet(location, rel, metrics)
        written.append(rel)
        for kind, frame in derived.items():  # a kind without rows has no file (a view shows no row of it)
            if len(frame):
                rel = run_file(kind, month, key, ingest_id)
                write_parquet(location, rel, to_arrow(kind, frame, **constants))
                written.append(rel)
        kept = None
        if keep_bundle:
            kept = bundles.kept_name(month, key, ingest_id, plan.kind == "baseline")
            bundles.keep(location, kept, plan.profile, plan.source, plan.kind == "baseline")
        judged = {
            "rules_sha256": rules_hash(config),
            "popprof_version": __version__,
            "findings": len(derived["findings"]),
            "account": len(derived["account"]),
            "limit": limit,
        }
        row_file = write_row(location, month, _catalogue_row(plan, who, ingest_id, judged))
        _check_written(location, plan, ingest_id, row_file, written, kept, before, replaced is not None)
        if replaced is not None:
            _remove_ingest(location, replaced, key, keep=row_file)
    finally:
        location.remove(marker)
    return AddResult(plan.run_id, name, "replaced" if replaced is not None else "added", month, ingest_id)


def _check_written(
    location: Location,
    plan: _Plan,
    ingest_id: str,
    row_file: str,
    written: list[str],
    kept: str | None,
    before: set[str] | frozenset[str],
    replacing: bool,
) -> None:
    """After the catalogue row: every file this add wrote is still there (a ``store fsck --fix`` run while it
    wrote could have taken them), and no other add stored the run with other content meanwhile (unless this
    add replaces it). Otherwise the add is withdrawn (its row, then its files) and fails with one line: never
    a run listed with missing tables, never one of two runs silently hidden by the other."""
    what = f"{location.root}: run {plan.run_id!r} profile {plan.profile.name!r}"
    gone = [rel for rel in written if not location.exists(rel)]
    problem = None
    if gone:
        problem = (
            f"{what}: {len(gone)} of the files this add wrote were removed while it ran ({gone[0]}; "
            "a store fsck --fix?); the add was withdrawn: add it again"
        )
    elif not replacing:
        rows = stored_rows(location, plan.run_id, plan.profile.name)
        others = [r for r in rows if r["ingest_id"] not in before and r["ingest_id"] != ingest_id]
        if others:
            problem = (
                f"{what}: another add stored it with other content at the same time; this add was "
                "withdrawn: pass --replace to overwrite that one, or give another --run-id"
            )
    if problem is None:
        return
    location.remove(row_file)
    for rel in written:
        location.remove(rel)
    if kept is not None:
        bundles.remove(location, kept)
    raise StoreConflict(problem)


def _catalogue_row(plan: _Plan, who: ident.Identity, ingest_id: str, judged: dict | None = None) -> dict:
    """The run's catalogue row; ``judged`` (the rule settings' hash, the popprof version and the rows of its
    findings and account) goes into the manifest's ``judged``, so a run judged with no finding is told from
    one added before findings were kept."""
    manifest = plan.manifest if judged is None else dict(plan.manifest, judged=judged)
    target = manifest.get("target", {})
    redacted = manifest.get("redacted")
    return {
        "run_id": plan.run_id,
        "profile": plan.profile.name,
        "created": plan.created,
        "commit": who.commit,
        "branch": who.branch,
        "ci_job": who.ci_job,
        "labels": json.dumps(who.labels, sort_keys=True),
        "kind": plan.kind,
        "source_format": target.get("source_format") or plan.profile.source_format,
        "ipu_arch": target.get("ipu_arch"),
        "num_ipus": target.get("num_ipus"),
        "tiles_per_ipu": target.get("tiles_per_ipu"),
        "poplar_version": target.get("poplar_version"),
        "format_version": manifest.get("format_version"),
        "tool_version": manifest.get("tool_version") or __version__,
        "redacted": bool(redacted.get("redacted")) if isinstance(redacted, dict) else False,
        "tables": json.dumps(sorted(plan.tables)),
        "content_sha256": plan.content,
        "ingest_id": ingest_id,
        "ingested_at": dt.datetime.now(dt.UTC),
        "manifest": json.dumps(manifest, sort_keys=True, default=str),
    }


def _remove_ingest(location: Location, old: dict, key: str, keep: str) -> None:
    """Delete the per-run files of a replaced ingest (compacted rows stay; the views no longer show them)."""
    month = ident.month_of(old["created"])
    kinds = [
        "metrics",
        "ranks",
        "findings",
        "account",
        *(table_kind(t) for t in json.loads(old.get("tables") or "[]")),
    ]
    for kind in kinds:
        location.remove(run_file(kind, month, key, old["ingest_id"]))
    for baseline in (False, True):
        bundles.remove(location, bundles.kept_name(month, key, old["ingest_id"], baseline))
    old_file = old.get("_file", "")
    if old_file and old_file != keep and not old_file.rsplit("/", 1)[-1].startswith(COMPACT_PREFIX):
        location.remove(old_file)  # the old ingest's own row (a compacted one stays; the views skip it)
