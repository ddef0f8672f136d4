"""``popprof trend --findings``: when a rule's finding started, changed severity or stopped firing on a
profile, with the range to bisect; re-runs of one commit, rule settings changes, runs never judged,
``--fail-on SEVERITY``, acks, and the JSON as stored (docs/trend.md, "Findings over the runs")."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from store_helpers import MK2, ROOT, run
from test_text_figures_whole import split_figures

import popprof.store as store
import popprof.store.ingest as ingest
from popprof.cli import main
from popprof.store.judged import rules_hash
from popprof.store.trend_findings import findings_trend
from popprof.store.trend_report import findings_text

#: the fields of a change of the run's limit in the JSON (docs/trend.md names each)
LIMIT_CHANGE_FIELDS = (
    "index",
    "before",
    "after",
    "last_old_run",
    "first_new_run",
    "last_old_commit",
    "first_new_commit",
    "not_kept_between",
)
MK2_V2 = ROOT / "fixtures" / "mk2_training_v2.popprof"
TRACE = ROOT / "fixtures" / "real" / "traces" / "tracelens_h100_bert_small.json.gz"
#: popprof check of the two Mk2 fixtures: exchange.share 0.133 -> 0.159 and host.stream-copy 0.105 -> 0.102;
#: these thresholds put the first across its warning (info -> warning) and the second under its error
#: (error -> warning), a real difference between the two profiles
RULES = '[rules]\n"exchange.share.warning" = 0.15\n"host.stream-copy.error" = 0.104\n'
NO_MEMORY = RULES + 'disable = ["memory.*"]\n'
#: the trace's host.launch-overhead (0.565, error by default) under thresholds it does not reach
QUIET = '[rules]\n"host.launch-overhead.warning" = 0.9\n"host.launch-overhead.error" = 0.95\n'


def _add(root: Path, source: Path, run_id: str, commit: str, day: int, config: Path, profile: str) -> None:
    args = ["-q", "store", "add", root, source, "--run-id", run_id, "--commit", commit, "--profile", profile]
    args += ["--time", f"2026-01-{day:02d}T00:00:00Z", "--config", config]
    assert main([str(a) for a in args]) == 0


def _add_unjudged(root: Path, source: Path, run_id: str, commit: str, day: int, config: Path) -> None:
    """An add as before findings were kept: no findings rows, no ``judged`` in the manifest."""
    row, frame = ingest._catalogue_row, ingest.findings_frame
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ingest, "findings_frame", lambda profile, config=None: frame(profile, config)[:0])
        patch.setattr(
            ingest, "_catalogue_row", lambda plan, who, ingest_id, judged=None: row(plan, who, ingest_id)
        )
        _add(root, source, run_id, commit, day, config, "mk2")


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    """Profile ``mk2``: r0 (c0, never judged), r1 and r2 (mk2_training), c3 = r3, r3b (mk2_training_v2) and
    r3c (mk2_training again: a re-run outvoted), r4 (v2 judged without the memory rules). Profile ``bert``:
    the trace under thresholds it does not reach (b1), then under the defaults (b2, b3)."""
    tmp = tmp_path_factory.mktemp("trendf")
    root = tmp / "store"
    store.init(root)
    rules, no_memory, quiet, default = (
        tmp / n for n in ("rules.toml", "nomem.toml", "quiet.toml", "none.toml")
    )
    rules.write_text(RULES)
    no_memory.write_text(NO_MEMORY)
    quiet.write_text(QUIET)
    default.write_text("")
    _add_unjudged(root, MK2, "r0", "c0", 1, rules)
    _add(root, MK2, "r1", "c1", 2, rules, "mk2")
    _add(root, MK2, "r2", "c2", 3, rules, "mk2")
    _add(root, MK2_V2, "r3", "c3", 4, rules, "mk2")
    _add(root, MK2_V2, "r3b", "c3", 5, rules, "mk2")
    _add(root, MK2, "r3c", "c3", 6, rules, "mk2")
    _add(root, MK2_V2, "r4", "c4", 7, no_memory, "mk2")
    _add(root, TRACE, "b1", "g1", 2, quiet, "bert")
    _add(root, TRACE, "b2", "g2", 3, default, "bert")
    _add(root, TRACE, "b3", "g3", 4, default, "bert")
    return root


def _json(capsys, *args: object) -> tuple[int, dict]:
    code, out, _ = run(capsys, "trend", *args, "--findings", "--format", "json")
    return code, {p["profile"]: p for p in json.loads(out)["profiles"]}


def _rules(profile: dict) -> dict[str, dict]:
    return {r["rule_id"]: r for r in profile["rules"]}


def test_transitions_with_the_range_to_bisect(history: Path, capsys) -> None:
    code, doc = _json(capsys, history)
    assert code == 0
    mk2 = doc["mk2"]
    assert mk2["runs"] == ["r0", "r1", "r2", "r3", "r4"] and mk2["commits"] == ["c0", "c1", "c2", "c3", "c4"]
    assert mk2["runs_per_point"] == [1, 1, 1, 3, 1]
    rules = _rules(mk2)
    (share,) = rules["exchange.share"]["changes"]
    assert (share["before"], share["after"], share["direction"]) == ("info", "warning", "worse")
    assert (share["last_old_run"], share["first_new_run"]) == ("r2", "r3")
    assert (share["last_old_commit"], share["first_new_commit"]) == ("c2", "c3")
    assert not share["settings_changed"] and share["recent"] and not share["acknowledged"]
    assert rules["exchange.share"]["state"] == "warning" and rules["exchange.share"]["since_run"] == "r3"
    (copy,) = rules["host.stream-copy"]["changes"]
    assert (copy["before"], copy["after"], copy["direction"]) == ("error", "warning", "better")
    # the same state at every judged point: no transition, firing since the first judged run
    headroom = rules["memory.headroom"]
    assert headroom["states"][:4] == ["not judged", "error", "error", "error"]
    assert headroom["since_run"] == "r4" and headroom["state"] == "not fired"
    assert rules["exchange.phases"]["changes"] == [] and rules["exchange.phases"]["since_run"] == "r1"


def test_a_commit_re_run_is_one_point_at_the_lower_median_state(history: Path, capsys) -> None:
    # c3: two runs of v2 (warning) and one of mk2_training (info): the point is warning, at its first run
    _, doc = _json(capsys, history)
    assert _rules(doc["mk2"])["exchange.share"]["states"][3] == "warning"
    # each run its own point: r3c (info) is a transition back, and then forth at r4
    _, each = _json(capsys, history, "--each-run", "--profile", "mk2")
    changes = _rules(each["mk2"])["exchange.share"]["changes"]
    assert [(c["first_new_run"], c["after"]) for c in changes] == [
        ("r3", "warning"),
        ("r3c", "info"),
        ("r4", "warning"),
    ]


def test_a_settings_change_is_labelled_and_never_fails(history: Path, capsys) -> None:
    _, doc = _json(capsys, history)
    (stop,) = _rules(doc["mk2"])["memory.headroom"]["changes"]
    assert (stop["before"], stop["after"], stop["direction"], stop["first_new_run"]) == (
        "error",
        "not fired",
        "stopped",
        "r4",
    )
    assert stop["settings_changed"]
    assert stop["before_rules_sha256"] == rules_hash(
        {"rules": {"exchange.share.warning": 0.15, "host.stream-copy.error": 0.104}}
    )
    assert stop["after_rules_sha256"] != stop["before_rules_sha256"]
    # the trace: host.launch-overhead starts firing (error) when the thresholds go back to the defaults
    (new,) = _rules(doc["bert"])["host.launch-overhead"]["changes"]
    assert (new["before"], new["after"], new["first_new_run"], new["settings_changed"]) == (
        "not fired",
        "error",
        "b2",
        True,
    )
    assert new["after_rules_sha256"] == rules_hash(None)
    code, out, _ = run(capsys, "trend", history, "--findings", "--profile", "bert", "--fail-on", "info")
    assert code == 0 and "new (rule settings changed): not fired -> error at run b2" in out


def test_runs_never_judged_are_not_judged_never_not_fired(history: Path, capsys) -> None:
    _, doc = _json(capsys, history, "--profile", "mk2")
    mk2 = doc["mk2"]
    assert mk2["not_judged"] == ["r0"] and mk2["rules_sha256"][0] is None
    for rule in mk2["rules"]:
        assert rule["states"][0] == "not judged"
        assert all(c["first_new_run"] != "r1" for c in rule["changes"])  # r1 is no start of firing
    code, out, _ = run(capsys, "trend", history, "--findings", "--profile", "mk2")
    assert "not judged (added before findings were kept): 1 point, r0" in out
    # a not judged point between two judged ones lies inside the range to bisect
    _, last = _json(capsys, history, "--profile", "mk2", "--last", "3")
    assert last["mk2"]["runs"] == ["r2", "r3", "r4"]


def test_fail_on_a_new_finding_at_or_above_a_severity(history: Path, capsys) -> None:
    assert run(capsys, "trend", history, "--findings", "--fail-on", "warning")[0] == 1
    # info -> warning crosses warning, not info: exchange.share fired already (the bert finding that starts is
    # a settings change)
    assert run(capsys, "trend", history, "--findings", "--fail-on", "info")[0] == 0
    # error -> warning is better, error stayed: nothing new at error
    assert run(capsys, "trend", history, "--findings", "--fail-on", "error")[0] == 0
    # the change at c3 is not among the latest point
    assert run(capsys, "trend", history, "--findings", "--fail-on", "warning", "--recent", "1")[0] == 0
    code, _, err = run(capsys, "trend", history, "--findings", "--fail-on", "regression")
    assert code == 2 and "give info, warning or error" in err
    code, _, err = run(capsys, "trend", history, "memory.total_incl_gaps_bytes", "--fail-on", "warning")
    assert code == 2 and "is for --findings" in err
    code, _, err = run(capsys, "trend", history, "memory.total_incl_gaps_bytes", "--findings")
    assert code == 2 and "findings only" in err


def test_an_acknowledged_new_finding_no_longer_fails(history: Path, capsys, tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "acked"
    shutil.copytree(history, root)
    code, out, _ = run(capsys, "trend", "ack", root, "exchange.share", "r3", "--note", "threshold crossed")
    assert code == 0 and "acknowledged exchange.share at run r3" in out
    assert run(capsys, "trend", root, "--findings", "--fail-on", "warning")[0] == 0
    _, doc = _json(capsys, root)
    assert _rules(doc["mk2"])["exchange.share"]["changes"][0]["acknowledged"]
    code, _, err = run(capsys, "trend", "ack", root, "no.such-rule", "r3")
    assert code == 2 and "to acknowledge" in err


def test_the_json_is_what_the_store_holds(history: Path, capsys) -> None:
    _, doc = _json(capsys, history)
    handle = store.open(history)
    (row,) = handle.frame(
        "SELECT severity, title, figure, value, threshold, message FROM findings "
        "WHERE run_id = 'r3' AND rule_id = 'exchange.share'"
    ).to_dict("records")
    change = _rules(doc["mk2"])["exchange.share"]["changes"][0]
    assert change["finding"] == row
    hashes = handle.frame(
        "SELECT run_id, json_extract_string(manifest, '$.judged.rules_sha256') AS h FROM runs WHERE profile = 'mk2'"
    )
    stored = {
        r: h if isinstance(h, str) else None for r, h in zip(hashes["run_id"], hashes["h"], strict=True)
    }
    assert doc["mk2"]["rules_sha256"] == [stored[r] for r in doc["mk2"]["runs"]]
    # a rule's title is its latest finding's (the title may say more at another severity)
    latest = handle.frame(
        "SELECT profile, rule_id, arg_max(title, created) AS title FROM findings GROUP BY ALL"
    ).itertuples(index=False)
    titles = {(p, r): t for p, r, t in latest}
    assert titles[("mk2", "exchange.share")] == "Exchange-bound run"
    assert all(r["title"] == titles[(p["profile"], r["rule_id"])] for p in doc.values() for r in p["rules"])


def test_every_json_field_is_documented(history: Path, capsys) -> None:
    docs = (ROOT / "docs" / "trend.md").read_text()
    table = docs[docs.index("The JSON of `--findings`") :]
    table = table[: table.index("\n\n", table.index("| field |"))]
    documented = {
        f
        for line in table.splitlines()
        if line.startswith("| `")
        for f in re.findall(r"`([^`]+)`", line.split(" | ")[0])
    }
    _, doc = _json(capsys, history)
    seen = set()
    for p in doc.values():
        seen |= {f"profiles[].{k}" for k in p}
        for r in p["rules"]:
            seen |= {f"rules[].{k}" for k in r}
            for c in r["changes"]:
                seen |= {f"changes[].{k}" for k in c}
                seen |= {f"finding.{k}" for k in c["finding"] or {}}
    seen |= {f"limit_changes[].{k}" for k in LIMIT_CHANGE_FIELDS}  # the history's limit never changes: below
    assert seen == documented, (sorted(seen - documented), sorted(documented - seen))


@pytest.mark.parametrize("width", [60, 80, 100])
def test_the_text_fits_and_keeps_figures_whole(history: Path, width: int) -> None:
    text = findings_text(findings_trend(history), width)
    assert all(len(line) <= width for line in text.splitlines())
    assert not split_figures(text)
    assert "WORSE: info -> warning at run r3 (last info at run r2; bisect c2..c3)" in " ".join(text.split())


def test_markdown_and_junit(history: Path, capsys) -> None:
    code, out, _ = run(capsys, "trend", history, "--findings", "--format", "markdown", "--fail-on", "warning")
    assert code == 1 and out.startswith("### popprof trend: 1 new warning-or-worse finding")
    assert "| `exchange.share` | mk2 | WORSE | info → warning | `r3` | `c2..c3` |" in out
    code, out, _ = run(capsys, "trend", history, "--findings", "--format", "junit")
    assert code == 0
    root = ET.fromstring(out)
    failed = [c.get("name") for c in root.iter("testcase") if c.find("failure") is not None]
    assert failed == ["exchange.share"]


def test_a_range_of_40_digit_commits_fits_abbreviated(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store.init(root)
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES)
    old, new = "a" * 40, "b" * 40
    _add(root, MK2, "run-1", old, 1, rules, "mk2")
    _add(root, MK2_V2, "run-2", new, 2, rules, "mk2")
    profiles = findings_trend(root)
    (change,) = next(r for r in profiles[0].rules if r.rule_id == "exchange.share").changes
    assert (change.last_old_commit, change.first_new_commit) == (old, new)  # whole in the JSON
    for width in (60, 80):
        text = findings_text(profiles, width)
        assert all(len(line) <= width for line in text.splitlines()) and not split_figures(text)
        assert f"bisect {old[:12]}..{new[:12]})" in " ".join(text.split())
    assert f"bisect {old}..{new})" in findings_text(profiles, 200)


def test_a_tie_between_two_re_runs_does_not_fire_and_an_unknown_profile_is_a_usage_error(
    tmp_path: Path, capsys
) -> None:
    root = tmp_path / "store"
    store.init(root)
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES)
    _add(root, MK2, "run-1", "c1", 1, rules, "mk2")
    _add(root, MK2_V2, "run-2", "c2", 2, rules, "mk2")  # exchange.share warning
    _add(root, MK2, "run-2b", "c2", 3, rules, "mk2")  # a re-run of c2 where it is info: the lower median
    (profile,) = findings_trend(root)
    share = next(r for r in profile.rules if r.rule_id == "exchange.share")
    assert profile.runs_per_point == [1, 2] and share.states == ["info", "info"] and not share.changes
    code, _, err = run(capsys, "trend", root, "--findings", "--profile", "nope")
    assert code == 2 and "no runs" in err and "'nope'" in err


def test_the_runs_limit_over_the_points_and_where_it_changed(history, tmp_path, capsys) -> None:
    """Each point's limit is summary's (kept in the manifest's ``judged``); a change is listed with the range
    to bisect, never failed on; a re-run tie takes the first run's; runs added before it was kept have none."""
    traces = ROOT / "fixtures" / "real" / "traces"
    sglang, vllm = (
        traces / "tracelens_mi300x_sglang_decode.json.gz",
        traces / "tracelens_b200_vllm_eager.json.gz",
    )
    root, config = tmp_path / "store", tmp_path / "none.toml"
    config.write_text("")
    store.init(root)
    for source, run_id, commit, day in (
        (sglang, "s1", "c1", 1),
        (vllm, "v2", "c2", 2),
        (sglang, "s2", "c2", 3),
    ):
        _add(root, source, run_id, commit, day, config, "serve")
    (p,) = findings_trend(root)
    assert p.limits == ["launch or dependency", "host"]  # c2: one run each way, the first run's (v2)
    (change,) = p.limit_changes
    assert (change.before, change.after, change.first_new_run, change.last_old_commit) == (
        "launch or dependency",
        "host",
        "v2",
        "c1",
    )
    capsys.readouterr()
    assert main(["summary", str(vllm), "--format", "json"]) == 0
    stated = json.loads(capsys.readouterr().out)["what_limits"]["limit"]
    manifest = store.open(root).frame("SELECT manifest FROM runs WHERE run_id = 'v2'")["manifest"][0]
    assert json.loads(manifest)["judged"]["limit"] == {"limit": stated["limit"], "share": stated["share"]}
    text = findings_text([p])
    assert "\n  limit: host since run v2 (commit c2)\n" in text
    flat = " ".join(text.split())  # wrapped at 80 columns
    assert (
        "changed: launch or dependency -> host at run v2 (last launch or dependency at run s1; bisect c1..c2)"
        in flat
    )
    code, doc = _json(capsys, root)
    (listed,) = next(iter(doc.values()))["limit_changes"]
    assert listed["after"] == "host" and set(listed) == set(LIMIT_CHANGE_FIELDS)
    # the history: r0 was added before anything was judged (no limit), the others compute on the Mk2 IPU
    mk2 = next(q for q in findings_trend(history) if q.profile == "mk2")
    assert mk2.limits[0] is None and set(mk2.limits[1:]) == {"device compute"} and not mk2.limit_changes
