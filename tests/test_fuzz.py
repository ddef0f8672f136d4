"""Bounded fuzz suite (issue 14): mutations of the fixtures and of the real samples through every reader and check.

Each family of seeds runs in one forked worker under an address-space limit, with a
per-case timer (tests/fuzz_harness.py says what is checked). The default run is sized for
CI (about a minute on 2 cores); ``POPPROF_FUZZ=long`` runs ten times as many cases,
``POPPROF_FUZZ_CASES=N`` sets the mutations per seed and ``POPPROF_FUZZ_SEED`` another seed.
"""

from __future__ import annotations

import fuzz_harness as fuzz
import pytest

#: (family, mutations per seed by default, seconds the whole family may take).
#: The seconds are CPU seconds of the forked workers (a loaded machine stretches wall time, not CPU time).
FAMILIES = [("text", 5, 240), ("sdk1", 6, 240), ("trace", 4, 300), ("bundle", 10, 240), ("config", 1, 240)]


def _cases(family: str, per_seed: int) -> list[fuzz.Case]:
    cases: list[fuzz.Case] = []
    for seed in fuzz.seed_files()[family]:
        if family == "config":
            cases += fuzz.config_cases(seed)
        elif family == "bundle":
            cases += fuzz.bundle_cases(seed, per_seed)
        else:
            count = max(2, per_seed // 3) if seed.stat().st_size > 200_000 else per_seed
            cases += fuzz.file_cases(seed, count)
    return cases


@pytest.mark.parametrize(("family", "per_seed", "seconds"), FAMILIES, ids=[f[0] for f in FAMILIES])
def test_fuzz_family_holds_the_contract(family, per_seed, seconds, tmp_path):
    cases = _cases(family, fuzz.case_count(per_seed))
    outcomes = fuzz.run_batch(cases, tmp_path, seconds * max(1, fuzz.case_count(per_seed) // per_seed))
    failures = [f"{o.case}: {'; '.join(o.problems)}" for o in outcomes if o.problems]
    assert not failures, f"{len(failures)} of {len(cases)} cases broke the contract:\n" + "\n".join(
        failures[:20]
    )
    assert len(outcomes) == len(cases)
    codes = {code for o in outcomes for code in o.codes.values()}
    assert 2 in codes and 3 not in codes  # the mutations do reach the error paths, never an internal error


def test_the_mutations_are_deterministic_and_vary():
    import numpy as np

    data = (fuzz.FIXTURES / "traces/begin_end.json").read_bytes()
    first = [fuzz.mutate(data, fuzz.rng_for("x"), True) for _ in range(20)]
    again = [fuzz.mutate(data, fuzz.rng_for("x"), True) for _ in range(20)]
    assert first == again
    kinds = {
        what.split("@")[0].rstrip("0123456789")
        for what, _ in (
            fuzz.mutate(data, rng, True) for rng in [np.random.default_rng(i) for i in range(200)]
        )
    }
    assert {
        "truncate",
        "flip",
        "delete_lines",
        "duplicate_lines",
        "numbers",
        "unicode",
        "nest",
        "splice",
        "types",
    } <= kinds
