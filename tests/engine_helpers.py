"""The engines of two run directories that diff compares engine by engine (synthetic IPU profiles)."""

from __future__ import annotations

from popprof.model.profile import Profile
from popprof.testing import synth


def two_engines() -> tuple[Profile, Profile, Profile]:
    """A ``training`` and an ``inference`` engine, and ``training`` with every step's cycles tripled (a change the
    default gate fails)."""
    training = synth.make_profile(name="training", num_steps=300, num_liveness_steps=40, seed=41)
    inference = synth.make_profile(name="inference", num_steps=200, num_liveness_steps=30, seed=42)
    bigger = training.copy()
    steps = bigger.steps.copy()
    steps["cycles"] = steps["cycles"] * 3
    bigger.set_table("steps", steps)
    return training, inference, bigger
