"""Liveness and execution plots, checked against the liveness and steps tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import popprof  # noqa: E402
from popprof.model.schema import STEP_CATEGORIES  # noqa: E402
from popprof.plots import execution, liveness  # noqa: E402
from popprof.testing import synth  # noqa: E402


@pytest.fixture(scope="module")
def profile():
    return synth.make_profile(
        num_ipus=2, num_steps=3000, num_liveness_steps=500, exchange_heavy=(0.4, 0.55), seed=11
    )


def artist(ax, gid):
    found = [a for a in ax.get_children() if a.get_gid() == gid]
    assert len(found) == 1, (gid, len(found))
    return found[0]


def test_liveness_line_is_base_plus_table(profile):
    ax = liveness(profile).axes[0]
    base = float(profile.tiles["always_live_bytes"].sum())
    line = artist(ax, "liveness")
    table = profile.liveness
    np.testing.assert_array_equal(line.get_xdata(), table["step"])
    np.testing.assert_allclose(
        np.asarray(line.get_ydata()) - base, table["not_always_live_bytes"].to_numpy(float)
    )
    peak_row = table.loc[table["not_always_live_bytes"].idxmax()]
    peak = artist(ax, "peak")
    assert list(peak.get_xdata()) == [peak_row["step"]]
    assert list(peak.get_ydata()) == [pytest.approx(base + peak_row["not_always_live_bytes"])]
    label = artist(ax, "peak-label").get_text()
    assert str(peak_row["program"])[-40:] in label and f"{int(peak_row['step']):,}" in label
    assert "bytes" in ax.get_ylabel() and "step" in ax.get_xlabel()


def test_liveness_total_memory_threshold(profile):
    from popprof.rules import RULES

    ax = liveness(profile).axes[0]
    base = float(profile.tiles["always_live_bytes"].sum())
    total = 2 * 1472 * 638_976
    share = (base + profile.liveness["not_always_live_bytes"].max()) / total
    assert share < 0.5 and not [ln for ln in ax.lines if ln.get_gid() == "total-memory"]
    assert (
        f"peak = {share * 100:.1f} % of total memory"
        in [t.get_text() for t in ax.get_legend().get_texts()][-1]
    )
    small = profile.copy("small target")
    small.set_table("target", profile.target.assign(num_tiles=1000))
    ax = liveness(small).axes[0]
    (line,) = [ln for ln in ax.lines if ln.get_gid() == "total-memory"]
    assert set(line.get_ydata()) == {1000 * 638_976}
    (warn,) = [ln for ln in ax.lines if ln.get_gid() == "threshold:warning"]
    warning = RULES["memory.liveness-peak"].params["warning"]
    assert list(set(warn.get_ydata())) == [pytest.approx(1000 * 638_976 * warning)]


def test_liveness_binned_keeps_the_peak():
    big = synth.make_profile(num_liveness_steps=9000, execution=False, debug=False, seed=2)
    ax = liveness(big, max_points=1000).axes[0]
    table = big.liveness
    base = float(big.tiles["always_live_bytes"].sum())
    line = artist(ax, "liveness")
    y = np.asarray(line.get_ydata()) - base
    width = -(-len(table) // 1000)
    expected = table["not_always_live_bytes"].groupby(np.arange(len(table)) // width).max()
    np.testing.assert_allclose(y, expected.to_numpy(float))
    assert y.max() == table["not_always_live_bytes"].max()
    assert list(artist(ax, "peak").get_xdata()) == [table["step"][table["not_always_live_bytes"].idxmax()]]


def expected_bins(profile, max_bins, ipu=None):
    steps = profile.steps if ipu is None else profile.steps[profile.steps["ipu"] == ipu]
    per_step = steps.groupby("step").agg(cycles=("cycles", "max"), category=("category", "first"))
    width = -(-(per_step.index.max() - per_step.index.min() + 1) // max_bins)
    binned = (
        per_step.groupby([(per_step.index - per_step.index.min()) // width, "category"], observed=False)[
            "cycles"
        ]
        .sum()
        .unstack(fill_value=0)
    )
    return binned, width


def test_execution_stacks_cycles_per_bin_and_category(profile):
    fig = execution(profile, max_bins=100)
    top, bottom = fig.axes[:2]
    expected, width = expected_bins(profile, 100)
    for cat in STEP_CATEGORIES:
        if expected[cat].sum() == 0:
            assert not [p for p in top.patches if p.get_gid() == f"cycles:{cat}"]
            continue
        data = artist(top, f"cycles:{cat}").get_data()
        np.testing.assert_allclose(data.values - data.baseline, expected[cat].to_numpy(float))
        share = artist(bottom, f"share:{cat}").get_data()
        np.testing.assert_allclose(
            share.values - share.baseline, (expected[cat] / expected.sum(axis=1)).to_numpy(float)
        )
        assert data.edges[1] - data.edges[0] == width
    assert "cycles" in top.get_ylabel()


def test_execution_of_one_ipu(profile):
    top = execution(profile, ipu=1, max_bins=50).axes[0]
    expected, _ = expected_bins(profile, 50, ipu=1)
    data = artist(top, "cycles:compute").get_data()
    np.testing.assert_allclose(data.values - data.baseline, expected["compute"].to_numpy(float))
    assert "IPU 1" in top.get_ylabel()


def span_x(patch) -> tuple[float, float]:
    xy = patch.get_transform().transform(patch.get_path().vertices)  # display coordinates
    xs = patch.axes.transData.inverted().transform(xy)[:, 0]
    return round(float(xs.min()), 6), round(float(xs.max()), 6)


def test_flagged_exchange_phases_are_shaded(profile):
    findings = popprof.check(profile, rules=["exchange.phases"])
    # one finding lists every phase (where["phases"]); each is shaded, not only the worst (where["steps"])
    ranges = [r for f in findings.items if "steps" in f.where for r in f.where["phases"]]
    assert ranges, "the synthetic exchange-heavy phase should be flagged"
    fig = execution(profile, findings)
    top = fig.axes[0]
    spans = sorted(span_x(p) for p in top.patches if str(p.get_gid()).startswith("phase:exchange.phases"))
    assert spans == sorted((float(a), float(b) + 1) for a, b in ranges)
    # plain step ranges work without findings
    spans = [
        span_x(p)
        for p in execution(profile, phases=[(100, 199)]).axes[1].patches
        if p.get_gid() == "phase:flagged"
    ]
    assert spans == [(100.0, 200.0)]


def test_execution_needs_steps():
    no_exec = synth.make_profile(execution=False, debug=False)
    with pytest.raises(popprof.MissingTableError, match="execution profile"):
        execution(no_exec)


def test_liveness_with_unknown_always_live_says_so(profile):
    """Without always-live bytes the base is not presented as a known 0 B."""
    blind = profile.copy("blind")
    tiles = blind.tiles.copy()
    tiles["always_live_bytes"] = pd.NA
    blind.set_table("tiles", tiles)
    if blind.has("variables"):
        blind.set_table("variables", blind.variables.assign(always_live=False))
    ax = liveness(blind).axes[0]
    np.testing.assert_allclose(
        np.asarray(artist(ax, "liveness").get_ydata()),
        blind.liveness["not_always_live_bytes"].to_numpy(float),
    )
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "always-live: unknown (not drawn)" in labels and not any(
        t.startswith("always-live (") for t in labels
    )
    assert labels[-1].startswith("not-always-live peak = ")


def test_execution_without_known_cycles_is_an_error_not_a_flat_plot(profile):
    from popprof.model.errors import UsageError

    blind = profile.copy("blind")
    steps = blind.steps.copy()
    steps["cycles"] = pd.array([pd.NA] * len(steps), dtype="Int64")
    blind.set_table("steps", steps)
    with pytest.raises(UsageError, match="no cycles"):
        execution(blind)
