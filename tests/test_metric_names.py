"""One name per figure: docs/diff.md names exactly the registry's metrics; old names still work, with a warning."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

import popprof
import popprof.metrics as registry
from popprof.cli import main
from popprof.compare import gate
from popprof.compare.baseline import dumps_baseline
from popprof.compare.gate import DeprecatedMetricName, budget_from_mapping
from popprof.metrics import counters
from popprof.metrics.account import PARTS
from popprof.model.schema import STEP_CATEGORIES
from popprof.testing import synth
from popprof.trace.device import DEVICE_CATEGORIES

DOC = Path(__file__).resolve().parent.parent / "docs" / "diff.md"
NAME = re.compile(
    r"`((?:memory|execution|trace|account|collectives|launches|pipeline|counters)\.[A-Za-z0-9_.<>*]+)`"
)


def documented_names() -> list[str]:
    return NAME.findall(DOC.read_text("utf-8"))


def known(name: str) -> bool:
    """A registry metric, a family written as prefix<cat>suffix, or a budget glob that matches something."""
    if name in registry.METRICS and not registry.METRICS[name].family:
        return True
    if "<cat>" in name:
        prefix = name.split("<cat>")[0]
        return prefix in registry.METRICS and registry.METRICS[prefix].family
    family = registry.describe(name)
    if (
        family is not None and family.family and "*" not in name
    ):  # a member: the suffix must be one the family can have
        suffix = name[len(family.name) :]
        members = {
            "execution.cycles.": STEP_CATEGORIES,
            "execution.share.": STEP_CATEGORIES,
            "trace.device_time_us.": DEVICE_CATEGORIES,
            "account.": [f"{p}_us" for p in (*PARTS, "window")],
            "counters.sass_flops.": counters.PRECISIONS,
        }
        if family.name == "counters.total.":  # any counter the trace records, if it adds up over kernels
            return counters.additive(suffix)
        return suffix in members[family.name] if family.name in members else suffix.endswith("_bytes")
    if "*" in name:
        return any(
            re.fullmatch(name.replace(".", r"\.").replace("*", ".*"), m.name + ("x" if m.family else ""))
            for m in registry.METRICS.values()
        )
    return False


def test_every_metric_name_in_the_docs_exists_or_is_a_listed_old_name():
    text = DOC.read_text("utf-8")
    renamed_section = text[text.index("### Renamed metrics") : text.index("## Per tile")]
    for name in documented_names():
        if name in registry.RENAMED:
            assert name in renamed_section, f"{name} is an old name used outside the renamed table"
        else:
            assert known(name), f"docs/diff.md names {name!r}, which the registry does not have"


def test_every_registry_metric_is_in_the_docs_table():
    names = set(documented_names())
    for m in registry.METRICS.values():
        assert any(n.startswith(m.name) and "<cat>" in n for n in names) if m.family else m.name in names, (
            m.name
        )


def test_no_two_names_for_one_figure():
    profile = synth.make_profile(num_steps=200, num_liveness_steps=20, seed=3)
    values = {k: v for k, v in registry.compute(profile).items() if v is not None}
    assert "execution.host_io_share" not in values and "execution.exchange_share" not in values
    share = values["execution.exchange_and_sync_share"]
    assert share == pytest.approx(
        sum(values.get(f"execution.share.{c}", 0.0) for c in ("exchange", "global_exchange", "sync"))
    )
    assert share > values["execution.share.exchange"]  # the two names that looked alike are different figures
    for old, new in registry.RENAMED.items():
        assert old not in registry.METRICS and registry.describe(new) is not None, (old, new)


def test_old_names_in_a_budget_apply_to_the_new_name_with_one_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        budget = budget_from_mapping(
            {"budgets": {"execution.exchange_share": {"absolute": 0.5}, "trace.host_stall_us": "+7%"}},
            "popprof.toml",
        )
    assert len(caught) == 1 and issubclass(caught[0].category, DeprecatedMetricName)
    message = str(caught[0].message)
    assert "execution.exchange_share -> execution.exchange_and_sync_share" in message
    assert "trace.host_stall_us -> trace.device_idle_us" in message
    assert budget.limit_for("execution.exchange_and_sync_share").absolute == 0.5
    assert budget.limit_for("trace.device_idle_us").relative == pytest.approx(0.07)

    with warnings.catch_warnings(record=True) as caught:  # the new name given too: it wins
        warnings.simplefilter("always")
        both = budget_from_mapping(
            {"execution.exchange_and_sync_share": "+1", "execution.exchange_share": "+2"}, "b"
        )
    assert both.limit_for("execution.exchange_and_sync_share").absolute == 1 and len(caught) == 1


def test_old_name_in_a_budget_file_gates_and_warns_on_one_stderr_line(tmp_path, capsys):
    base = synth.make_profile(num_steps=200, num_liveness_steps=20, seed=4)
    worse = base.copy()
    steps = worse.steps.copy()
    steps.loc[steps["category"].astype(str) == "exchange", "cycles"] *= 5
    worse.set_table("steps", steps)
    from popprof.readers import bundle

    paths = [bundle.write(p, tmp_path / f"{n}.popprof") for n, p in (("base", base), ("worse", worse))]
    budget = tmp_path / "budget.toml"
    budget.write_text('[budgets]\n"execution.exchange_share" = { absolute = 0.001 }\n')
    code = main(["diff", *map(str, paths), "--budget", str(budget), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 1 and '"metric": "execution.exchange_and_sync_share"' in out
    warning_lines = [line for line in err.splitlines() if "old metric name" in line]
    assert len(warning_lines) == 1 and warning_lines[0].startswith("popprof: warning:")


def test_a_baseline_written_under_an_old_name_reads_under_the_new_one(tmp_path):
    profile = synth.make_profile(num_steps=200, num_liveness_steps=20, seed=6)
    text = dumps_baseline(profile).replace(
        '"execution.exchange_and_sync_share"', '"execution.exchange_share"'
    )
    assert '"execution.exchange_share"' in text
    old = tmp_path / "old-baseline.json"
    old.write_text(text)
    result = popprof.diff(str(old), profile)
    row = result.metrics.set_index("name").loc["execution.exchange_and_sync_share"]
    assert row["status"] == "unchanged"
    assert gate(result, {"execution.exchange_and_sync_share": "+0"}).passed
