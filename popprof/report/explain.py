"""What limits this run: the time account in a line per device and the top opportunities with their gains.

:func:`what_limits` builds the part of a summary, report or pilot that opens it (``what_limits`` in the
JSON); :func:`render_what_limits` prints it for a terminal, within 80 columns. The account is
:mod:`popprof.metrics.account`; the opportunities are the findings of :func:`popprof.rules.check`, already
ranked by their estimated gain and counted once (:mod:`popprof.rules.pricing`).
"""

from __future__ import annotations

import textwrap

import pandas as pd

from ..io import units, words
from ..io.plural import plural
from ..metrics.account import BASIS_TEXT, GPU_PARTS, IPU_PARTS, PART_WORDS, run_account
from ..metrics.capture import capture_section
from ..metrics.collectives import skew_spans
from ..metrics.counters import replay_section
from ..metrics.host_cpu import launchers_in_gaps, on_cpu_words
from ..metrics.limit import run_limit
from ..model.profile import Profile
from ..rules.base import Findings
from ..rules.host import drained_words
from ..trace.intervals import device_label
from .findings import wrap_text
from .limit_words import limit_items, limit_text

#: Opportunities listed (the JSON and the text).
TOP_OPPORTUNITIES = 3
#: Devices shown one line each; beyond this, one pooled line (the summary's device table has the rest).
DEVICE_LINES = 4
WIDTH = 80


def _shares(row: dict) -> list[tuple[str, float]]:
    names = GPU_PARTS if row["platform"] == "gpu" else IPU_PARTS
    window = float(row["window_us"])
    if window <= 0:
        return []
    pairs = [(p, float(row[p]) / window) for p in names if not pd.isna(row[p])]
    return sorted(pairs, key=lambda pair: -pair[1])


def what_limits(
    profile: Profile, findings: Findings | None = None, top: int = TOP_OPPORTUNITIES
) -> dict | None:
    """The account's run rows as shares with the largest part of each device, and the ``top`` findings
    with an estimated gain (``rule_id``, ``severity``, ``title``, ``figure``, ``share``, ``estimated_gain``).
    None when the profile has neither an account nor a priced finding."""
    runs = run_account(profile)
    waits = skew_spans(profile) if not runs.empty and (runs["platform"] == "gpu").any() else {}
    devices = []
    for row in runs.to_dict("records"):
        shares = _shares(row)
        if not shares:
            continue
        entry = {
            "rank": None if pd.isna(row["rank"]) else int(row["rank"]),
            "device": row["device"],
            "basis": row["basis"],
            "window_us": float(row["window_us"]),
            "shares": dict(shares),
            "largest": {"part": shares[0][0], "share": shares[0][1]},
        }
        waited = waits.get(device_label(row["rank"], row["device"]))
        if waited is not None:  # the part of communication spent waiting for the last rank of a collective
            entry["waiting_share"] = float((waited[1] - waited[0]).sum()) / float(row["window_us"])
        devices.append(entry)
    opportunities = []
    if findings is not None:
        for f in findings.items:
            if f.estimated_gain is None or not f.estimated_gain.value:
                continue
            opportunities.append(
                {
                    "rule_id": f.rule_id,
                    "severity": f.severity,
                    "title": f.title,
                    "figure": f.figure,
                    "share": f.share,
                    "estimated_gain": f.estimated_gain.to_dict(),
                }
            )
            if len(opportunities) >= top:
                break
    capture = capture_section(profile)
    replay = replay_section(profile)
    if not devices and not opportunities and capture is None and replay is None:
        return None
    doc: dict = {"devices": devices, "opportunities": opportunities}
    limit = run_limit(profile)
    if limit is not None:
        doc["limit"] = limit
    launchers = _launchers(profile)
    if launchers:
        doc["host_in_gaps"] = launchers
    drained = _drained(findings)
    if drained:
        doc["drained_gaps"] = drained
    if capture is not None:
        doc["graph_capture"] = capture
    if replay is not None:
        doc["counter_replay"] = replay
    return doc


#: the leaf functions "What limits this run" names per launching thread (the summary's block has more)
GAP_FUNCTIONS = 2


def _launchers(profile: Profile) -> list[dict]:
    """Per device with idle gaps, its launching thread on and off CPU in them (``metrics.host_cpu``): ``rank``,
    ``device``, ``thread``, ``gaps_us``, ``on_cpu_share``, ``on_cpu_parts`` (with the CPU samples' calls: the
    on-CPU shares computing, in communication calls, in calls blocking on the device), ``verdict`` and the most
    sampled ``functions`` (name,
    share of the thread's samples in the gaps); ``[]`` without context switches."""
    return [
        {
            "rank": t["rank"],
            "device": t["device"],
            "thread": t["thread"],
            "gaps_us": t["gaps_us"],
            "on_cpu_share": t["on_cpu_share"],
            "on_cpu_parts": t["on_cpu_parts"],
            "verdict": t["verdict"],
            "functions": [
                {"function": f["function"], "share": f["samples"] / t["gap_samples"]}
                for f in t["gap_functions"][:GAP_FUNCTIONS]
            ],
        }
        for t in launchers_in_gaps(profile).values()
    ]


#: the share of a device's idle (the gaps of ``host.device-gaps``) that gaps drained by a wait must reach for "What
#: limits this run" to name them (the rule's message names any; its advice leads with them from half)
DRAINED_NOTE_SHARE = 0.10
#: the blocking calls named per device
DRAINED_CALLS = 2


def _drained(findings: Findings | None) -> list[dict]:
    """Per device whose ``host.device-gaps`` gaps began with the host blocked on the device for at least
    :data:`DRAINED_NOTE_SHARE` of their time (the finding's evidence: ``after_wait``, ``dur_us``): ``rank``,
    ``device``, ``gaps`` (drained), ``of_gaps``, ``drained_us``, ``idle_us``, ``share`` and the blocking ``calls``
    (``call``, ``us``: the drained gaps' time by the call each began in, largest first); ``[]`` without."""
    found = next((f for f in (findings.items if findings else []) if f.rule_id == "host.device-gaps"), None)
    evidence = None if found is None else found.evidence
    if evidence is None or "after_wait" not in evidence.columns or evidence.empty:
        return []
    out = []
    for (rank, device), group in evidence.groupby(
        ["rank", "device"], dropna=False, sort=False, observed=True
    ):
        idle = float(group["dur_us"].sum())
        after = group["after_wait"].notna().to_numpy()
        drained = float(group["dur_us"].to_numpy()[after].sum())
        if idle <= 0 or drained < DRAINED_NOTE_SHARE * idle:
            continue
        calls = (
            group[after]
            .groupby("after_wait", observed=True)["dur_us"]
            .sum()
            .sort_values(ascending=False, kind="stable")
        )
        out.append(
            {
                "rank": None if pd.isna(rank) else int(rank),
                "device": None if pd.isna(device) else str(device),
                "gaps": int(after.sum()),
                "of_gaps": len(group),
                "drained_us": drained,
                "idle_us": idle,
                "share": drained / idle,
                "calls": [{"call": str(k), "us": float(v)} for k, v in calls.head(DRAINED_CALLS).items()],
            }
        )
    return out


def drained_notes(doc: dict | None) -> list[str]:
    """Per device, the sentence naming the idle gaps that began with the host blocked on the device (the
    document's ``drained_gaps``: a synchronisation drained the queue); ``[]`` without."""
    notes = []
    for d in (doc or {}).get("drained_gaps") or []:
        label = device_label(d["rank"] if d["rank"] is not None else float("nan"), d["device"])
        calls = ", ".join(f"{c['call']} {units.duration(c['us'])}" for c in d["calls"])
        notes.append(
            f"Idle after a wait on {label} (host.device-gaps): "
            + drained_words(
                d["gaps"], d["of_gaps"], d["drained_us"], d["idle_us"], f" ({calls})" if calls else ""
            )
        )
    return notes


def host_gaps_notes(doc: dict | None) -> list[str]:
    """Per device, the sentence saying whether its launching thread computed or waited in the device's idle
    gaps (the document's ``host_in_gaps``); ``[]`` without context switches."""
    notes = []
    for t in (doc or {}).get("host_in_gaps") or []:
        label = device_label(t["rank"] if t["rank"] is not None else float("nan"), t["device"])
        sampled = ", ".join(f"{f['function']} {units.percent(f['share'])}" for f in t["functions"])
        notes.append(
            f"Host in {label}'s idle gaps ({units.duration(t['gaps_us'])}): its launching thread "
            f"{t['thread']} {on_cpu_words(t['on_cpu_share'], t.get('on_cpu_parts'))}, {t['verdict']}"
            + (f" (sampled: {sampled})" if sampled else "")
        )
    return notes


def capture_note(doc: dict | None) -> str | None:
    """The sentence saying the trace records graph capture (the document's ``graph_capture``), or None."""
    capture = (doc or {}).get("graph_capture")
    if not capture:
        return None
    calls = ", ".join(f"{name} x{count:,}" for name, count in capture["calls"].items())
    launches = plural(capture["launches"], "kernel launch", "kernel launches")
    return (
        f"Graph capture: {capture['captured_launches']:,} of {launches} were recorded into CUDA/HIP graphs, "
        f"not run ({calls}); the device's idle while the host "
        "captured is a one-off cost of graphs, left out of the idle rules: profile the graphs' replay for the "
        "steady state"
    )


def replay_note(doc: dict | None) -> str | None:
    """The sentence saying the trace's kernel times are CUPTI's range-profiler replays (the document's
    ``counter_replay``), or None."""
    replay = (doc or {}).get("counter_replay")
    if not replay:
        return None
    kernels = plural(replay["kernels"], "kernel", "kernels")
    return (
        f"Counter replay: {kernels} recorded by CUPTI's range profiler, each replayed under hardware counters "
        f"(median range {units.duration(replay['median_range_us'])}): its times are the profiler's, not the "
        'run\'s, so the account and every time figure describe the profiling: read its "Hardware counters", and '
        "profile the run without counters for its times"
    )


def _account_items(entry: dict) -> list[str]:
    label = device_label(entry["rank"] if entry["rank"] is not None else float("nan"), entry["device"])
    parts = []
    for part, share in entry["shares"].items():
        if share < 0.0005:
            continue
        text = f"{PART_WORDS.get(part, part)} {units.percent(share)}"
        if part == "communication" and entry.get("waiting_share", 0.0) >= 0.0005:
            text += f" ({units.percent(entry['waiting_share'])} waiting for the last rank)"
        parts.append(text)
    return [f"{label}, {units.duration(entry['window_us'])}:", *parts]


def pack(items: list[str], width: int, indent: str, more: str, sep: str = "; ") -> list[str]:
    """The first item, then the others joined by ``sep``, in lines of at most ``width`` columns, never
    breaking inside an item (an item longer than a line gets a line of its own)."""
    if not items:
        return []
    lines: list[str] = []
    line = indent + items[0]
    rest = items[1:]
    for i, item in enumerate(rest):
        piece = item + (sep.rstrip() if i < len(rest) - 1 else "")
        if len(line) + 1 + len(piece) > width:
            lines.append(line)
            line = more + piece
        else:
            line += " " + piece
    lines.append(line)
    return lines


def _pooled(devices: list[dict]) -> dict:
    window = sum(d["window_us"] for d in devices)
    totals: dict[str, float] = {}
    for d in devices:
        for part, share in d["shares"].items():
            totals[part] = totals.get(part, 0.0) + share * d["window_us"]
    shares = dict(sorted(((p, v / window) for p, v in totals.items()), key=lambda pair: -pair[1]))
    pooled = {"rank": None, "device": f"{len(devices)} devices", "window_us": window, "shares": shares}
    if any("waiting_share" in d for d in devices):
        pooled["waiting_share"] = sum(d.get("waiting_share", 0.0) * d["window_us"] for d in devices) / window
    return pooled


def _gain_text(gain: dict) -> str:
    return units.gain(gain["value"], gain["unit"], gain.get("whole"), of=gain.get("of"))


def render_what_limits(doc: dict | None, width: int = WIDTH) -> list[str]:
    """The "What limits this run" lines (empty without a document), wrapped at ``width`` columns."""
    if not doc:
        return []
    lines = ["What limits this run"]
    devices = doc.get("devices") or []
    if devices:
        bases = {d["basis"] for d in devices}
        basis = "; ".join(BASIS_TEXT.get(b, b) for b in sorted(bases))
        lines += textwrap.wrap(
            f"Time account (window: {basis})",
            width,
            initial_indent="  ",
            subsequent_indent="    ",
            break_on_hyphens=False,
        )
        shown = devices if len(devices) <= DEVICE_LINES else [_pooled(devices)]
        for entry in shown:
            lines += pack(_account_items(entry), width, "    ", "      ")
    if doc.get("limit"):
        lines += pack(limit_items(doc["limit"]), width, "  ", "    ", sep=", ")
    path = doc.get("critical_path")
    if path:
        rank, ranks = path["rank"], path["ranks"]
        who = (
            ""
            if rank is None
            else f" (rank {rank}, the longest of {ranks})"
            if ranks > 1
            else f" (rank {rank})"
        )
        lines += textwrap.wrap(
            f"Critical path{words.steps_words(path.get('steps'))}{who}: "
            f"{units.duration(path['length_us'])}, {units.percent(path['share'])} "
            f"{words.CRITICAL_PATH_WORDS[path['part']]}; all of that free would shorten it by "
            f"{units.duration(path['saving_us'])}"
            + (
                f"; its longest step {path['longest_step']['step']} "
                f"({units.duration(path['longest_step']['length_us'])})"
                if path.get("longest_step")
                else ""
            ),
            width,
            initial_indent="  ",
            subsequent_indent="    ",
            break_on_hyphens=False,
        )
    for note in (capture_note(doc), replay_note(doc), *host_gaps_notes(doc), *drained_notes(doc)):
        if note:  # a number stays with its unit
            lines += wrap_text(note, width, "  ", "    ")
    opportunities = doc.get("opportunities") or []
    if opportunities:
        lines.append("  Top opportunities (estimated gain: an upper bound)")
        for i, o in enumerate(opportunities, 1):
            gain, rule = f"{i}. {_gain_text(o['estimated_gain'])}", f"{o['rule_id']}: {o['title']}"
            if len(f"    {gain}  {rule}") <= width:
                lines.append(f"    {gain}  {rule}")
                continue
            # the rule and its title stay together on a line of their own when both do not fit beside the gain
            lines += textwrap.wrap(gain, width, initial_indent="    ", subsequent_indent="       ")
            lines += textwrap.wrap(
                rule, width, initial_indent="       ", subsequent_indent="         ", break_on_hyphens=False
            )
    elif devices:
        lines.append("  No rule found an opportunity to price (popprof check lists what was evaluated).")
    return lines


def add_critical_path(
    profile: Profile, doc: dict, top: int = 10, steps: tuple[int, int] | None = None
) -> dict:
    """``doc`` (:func:`popprof.metrics.summary.summarise`'s) with each rank's critical path in its trace
    section, ``critical_path`` (:func:`popprof.metrics.critical_path.critical_paths`, its ``top`` at most 5
    names, the work of ``steps`` only when given; an empty list without GPU work); unchanged without a trace
    section. For the whole trace (no ``steps``) of at least 2 profiler steps, also ``critical_path_by_step``:
    each step's own path per rank (:func:`popprof.metrics.critical_path_steps.critical_paths_by_step`'s rows).
    The summary and the report both read it from here."""
    if isinstance(doc.get("trace"), dict):
        from ..metrics.critical_path import TOP_EVENTS, critical_paths, path_steps
        from ..metrics.critical_path_steps import critical_paths_by_step, step_records

        doc["trace"]["critical_path"] = critical_paths(profile, top=min(top, TOP_EVENTS), steps=steps)
        if steps is None and len(path_steps(profile)) >= 2:
            doc["trace"]["critical_path_by_step"] = step_records(critical_paths_by_step(profile))
    return doc


#: How many patterns the summary's "Kernel sequences" block lists (HTA's ``top_k``; the JSON has every one).
SEQUENCE_LINES = 5


def add_kernel_sequences(profile: Profile, doc: dict, operator: str, min_length: int = 3) -> dict:
    """``doc`` (:func:`popprof.metrics.summary.summarise`'s) with ``kernel_sequences`` in its trace section: the
    frequent kernel sequences under the calls whose name contains ``operator``
    (:func:`popprof.metrics.kernel_sequences.kernel_sequences`, HTA 0.5.0's, per rank): ``operator``,
    ``min_length`` and ``rows`` (``rank``, ``pattern``: HTA's ``"|"``-joined text, ``operator``, ``kernels``,
    ``count``, ``gpu_us``, ``cpu_us``; each rank's in HTA's order). Unchanged without a trace section."""
    if isinstance(doc.get("trace"), dict):
        from ..metrics.kernel_sequences import kernel_sequences
        from ..trace.masks import rank_array

        rows: list[dict] = []
        for rank in sorted(set(rank_array(profile).tolist())):
            rows += kernel_sequences(profile, operator, min_length, rank).to_dict("records")
        doc["trace"]["kernel_sequences"] = {"operator": operator, "min_length": min_length, "rows": rows}
    return doc


def longest_critical_path(paths: list[dict] | None) -> dict | None:
    """For "What limits this run": the rank whose critical path is longest, its largest part, that part's share
    and what making that part free would buy (``rank``, ``length_us``, ``part``, ``share``, ``saving_us``: the
    figures of :func:`popprof.metrics.critical_path.critical_paths`); None without a path."""
    paths = [p for p in paths or [] if p["length_us"] > 0]
    if not paths:
        return None
    path = max(paths, key=lambda p: p["length_us"])
    part = max(path["parts_us"], key=lambda k: path["parts_us"][k])
    out = {
        "rank": path["rank"],
        "ranks": len(paths),
        "length_us": path["length_us"],
        "part": part,
        "share": path["shares"][part],
        "saving_us": path["savings_us"][part],
    }
    if "steps" in path:
        out["steps"] = path["steps"]
    return out


def longest_step(rows: list[dict] | None, rank: int | None) -> dict | None:
    """Of the critical path by step (:func:`popprof.metrics.critical_path_steps.step_records`), the step whose
    path is longest on ``rank`` (``step``, ``length_us``); None without rows for it."""
    mine = [r for r in rows or [] if r["rank"] == rank and r["length_us"] > 0]
    if not mine:
        return None
    row = max(mine, key=lambda r: r["length_us"])  # the first of equal lengths: the earliest step
    return {"step": int(row["step"]), "length_us": float(row["length_us"])}


def explained_summary(
    profile: Profile,
    top: int = 10,
    config: dict | None = None,
    critical_path: bool = False,
    steps: tuple[int, int] | None = None,
    kernel_sequences: str | None = None,
    min_sequence_length: int = 3,
) -> dict:
    """:func:`popprof.metrics.summary.summarise` with ``what_limits`` after the profile's name: the account
    and the top opportunities of the rules (run with ``config``'s rule settings), figures shared once.
    ``critical_path``: a GPU trace's section also holds each rank's critical path
    (:func:`popprof.metrics.critical_path.critical_paths`, its ``top`` at most 5 names), of the work of
    ``steps`` (first and last profiler step) only when given. ``kernel_sequences``: an operator name (part of
    one) whose frequent kernel sequences of at least ``min_sequence_length`` kernels the trace section also
    holds (:func:`add_kernel_sequences`)."""
    from ..metrics import shared
    from ..metrics.summary import summarise
    from ..rules import check

    with shared(profile):
        doc = summarise(profile, top=top)
        if critical_path:
            add_critical_path(profile, doc, top, steps)
        if kernel_sequences:
            add_kernel_sequences(profile, doc, kernel_sequences, min_sequence_length)
        findings = check(profile, config=config)  # ranked by gain, gains counted once
        limits = what_limits(profile, findings)
    if limits is None:
        return doc
    longest = longest_critical_path((doc.get("trace") or {}).get("critical_path"))
    if longest is not None:
        step = longest_step((doc.get("trace") or {}).get("critical_path_by_step"), longest["rank"])
        if step is not None:
            longest["longest_step"] = step
        limits["critical_path"] = longest
    head = {k: doc[k] for k in ("profile", "source", "source_format") if k in doc}
    return {**head, "what_limits": limits, **{k: v for k, v in doc.items() if k not in head}}


def display_rows(doc: dict | None) -> dict | None:
    """The document as display strings for HTML: ``devices`` (label, window, parts), ``opportunities``
    (gain, rule id, title, basis) and the notes (``capture``, ``replay``, ``host_in_gaps``); None without a
    document."""
    if not doc:
        return None
    devices = [
        (
            device_label(d["rank"] if d["rank"] is not None else float("nan"), d["device"]),
            units.duration(d["window_us"]),
            BASIS_TEXT.get(d["basis"], d["basis"]),
            "; ".join(_account_items(d)[1:]),
        )
        for d in doc.get("devices") or []
    ]
    opportunities = [
        (_gain_text(o["estimated_gain"]), o["rule_id"], o["title"], o["estimated_gain"]["basis"])
        for o in doc.get("opportunities") or []
    ]
    return {
        "devices": devices,
        "opportunities": opportunities,
        "capture": capture_note(doc),
        "replay": replay_note(doc),
        "host_in_gaps": host_gaps_notes(doc) + drained_notes(doc),
        "limit": limit_text(doc["limit"]) if doc.get("limit") else None,
    }


class WhatLimits:
    """What limits a run, for a notebook or a script: ``doc`` is :func:`what_limits`'s document (JSON-ready);
    the text repr is the summary's opening lines, the HTML repr the report's block."""

    def __init__(self, doc: dict | None) -> None:
        self.doc = doc or {"devices": [], "opportunities": []}

    @property
    def limit(self) -> str | None:
        """The run's limit (``device compute``, ``data movement``, ``load imbalance``, ``host``, ``launch or
        dependency``, ``undetermined``; ``docs/figures.md``), None without a time account; its share and every
        group's are ``doc["limit"]``."""
        limit = self.doc.get("limit")
        return None if limit is None else limit["limit"]

    def __repr__(self) -> str:
        return (
            "\n".join(render_what_limits(self.doc))
            or "What limits this run: no device time and no priced finding"
        )

    def _repr_html_(self) -> str:
        from .templating import render_template

        return render_template(
            "what_limits.html.j2", wl=display_rows(self.doc) or {"devices": [], "opportunities": []}
        )


def explain(profile: Profile, config: dict | None = None) -> WhatLimits:
    """What limits ``profile``'s run: the time account per device and the top findings priced by their gain
    (:func:`popprof.rules.check` with ``config``'s rule settings), as :class:`WhatLimits`."""
    from ..metrics import shared
    from ..rules import check

    with shared(profile):
        return WhatLimits(what_limits(profile, check(profile, config=config)))
