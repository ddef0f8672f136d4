"""Notebook displays of Profile and Findings come from templates with autoescaping (popprof/markup)."""

from __future__ import annotations

import pytest

from popprof.markup import make_environment, render
from popprof.report.templating import environment as report_environment
from popprof.rules.base import Finding, Findings
from popprof.testing import synth

HOSTILE = "<img src=x onerror=alert(1)>"


def test_profile_display_lists_tables_and_escapes_names():
    profile = synth.make_profile(num_ipus=1, num_steps=4, num_liveness_steps=4, seed=1)
    profile.name = HOSTILE
    shown = profile._repr_html_()
    assert HOSTILE not in shown and "&lt;img src=x onerror=alert(1)&gt;" in shown
    assert "<td><code>tiles</code></td>" in shown and ">1,472</td>" in shown  # rows as repr() prints them


def test_findings_display_escapes_every_text_and_lists_what_was_not_evaluated():
    found = Findings(
        items=[Finding("memory.x", "error", "t", f"tile 3 holds {HOSTILE}", advice=f"rename {HOSTILE}")],
        not_evaluated=[("trace.y", f"needs {HOSTILE}")],
        profile_name=HOSTILE,
    )
    shown = found._repr_html_()
    assert HOSTILE not in shown and shown.count("&lt;img") == 4
    assert "color:#c62828" in shown and "<code>memory.x</code>" in shown
    assert "not evaluated (1)" in shown and "<code>trace.y</code>" in shown
    assert "not evaluated" not in Findings(profile_name="p")._repr_html_()


def test_one_environment_configuration_for_every_html_output():
    report = report_environment()
    base = make_environment("popprof.markup")
    assert report.autoescape is True and base.autoescape is True
    assert type(report.undefined) is type(base.undefined)  # undefined names are an error in both
    assert {"bytes", "n", "short"} <= set(report.filters)  # the report adds the io/units formatters
    with pytest.raises(Exception, match="undefined"):
        render("profile.html.j2", name="p")  # a missing value is an error, not an empty cell


def test_diff_and_gate_displays_escape_names_and_show_the_verdict():
    import popprof

    base = synth.make_profile(num_ipus=1, num_steps=4, num_liveness_steps=4, seed=1)
    new = synth.make_profile(num_ipus=1, num_steps=4, num_liveness_steps=4, seed=2)
    base.name, new.name = HOSTILE, "v2"
    result = popprof.diff(base, new)
    verdict = popprof.gate(result)
    shown = result._repr_html_()
    assert HOSTILE not in shown and "&lt;img src=x" in shown and verdict.verdict in shown
    assert "<th>metric</th>" in shown and "e+0" not in shown  # changed metrics, formatted by io/units
    verdict.budget_source = HOSTILE
    gate_shown = verdict._repr_html_()
    assert HOSTILE not in gate_shown and "&lt;img src=x" in gate_shown and "<table" in gate_shown
