"""The analyses the rules judge, tested on their own: ``metrics/phases.py`` and ``metrics/gaps.py``."""

from __future__ import annotations

import numpy as np
import pytest
from test_rules_host import DEVICE, HOST, trace

from popprof.metrics import gaps as mg
from popprof.metrics import phases as mp
from popprof.testing.synth import make_profile
from popprof.trace.intervals import device_activities, host_events, thread_labels


def test_phase_bands_merge_adjacent_flagged_windows():
    share = np.array([0.1, 0.4, 0.6, 0.2, 0.3, np.nan])
    bands, starts, ends = mp.phase_bands(share, 0.3, 0.5)
    assert bands.tolist() == [0, 1, 2, 0, 1, 0]  # inclusive thresholds; NaN is no band
    assert starts.tolist() == [1, 4] and ends.tolist() == [2, 4]
    assert mp.phase_of_window(bands, starts).tolist() == [-1, 0, 0, -1, 1, -1]


def test_step_phases_sum_to_the_windows_and_none_without_phases():
    profile = make_profile(num_steps=1000, num_liveness_steps=20, seed=5)
    found = mp.step_phases(profile, window=50, moderate=0.05, high=0.5, max_phases=3, top=2)
    assert found is not None and len(found.chosen) <= 3
    flagged = found.windows[found.windows["phase"] >= 0]
    assert found.phases["exchange_cycles"].sum() == pytest.approx(flagged["exchange_cycles"].sum())
    assert found.total_cycles == pytest.approx(found.windows["cycles"].sum())
    assert found.time_us(found.total_cycles) == pytest.approx(
        found.total_cycles / found.ipus / profile.target_value("clock_hz") * 1e6
    )
    assert set(found.programs) == set(found.chosen["phase"])
    assert mp.step_phases(profile, window=50, moderate=1.1, high=1.2, max_phases=3, top=2) is None


def test_device_gaps_and_their_attribution():
    profile = trace(DEVICE, HOST)
    (activity,) = device_activities(profile)
    gs, ge = mg.device_gaps(activity, 1000.0)
    assert gs.tolist() == [300.0] and ge.tolist() == [1300.0]
    found = mg.attribute_gaps(activity, gs, ge, host_events(profile), thread_labels(profile), 2)
    assert found.idle_us == 1000.0 and found.span_us == 1400.0
    assert found.by_label.index[0] == "DataLoader.__next__" and found.by_label.iloc[0] == 800.0
    assert found.top_threads == ["MainThread (1)", "loader (2)"]
    assert found.waited_us == 0.0
    # the union 250-1400 of two overlapping events (1,150 us) less the device busy 250-300 and 1300-1400
    assert mg.idle_during(activity, np.array([250.0, 300.0]), np.array([800.0, 1400.0])) == pytest.approx(
        1000.0
    )
