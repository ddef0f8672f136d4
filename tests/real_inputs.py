"""The real public inputs under ``fixtures/real`` (provenance and licences: its READMEs), listed once for the
tests that run over every one of them: which files are not profiles, and which directories are one run."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"

#: Files under fixtures/real that are no profile: notes, and the reference tools' figures and scripts.
NOT_PROFILES = frozenset(
    {
        "README.md",
        "FUZZ-SEEDS.md",
        "hta_reference.json",
        "make_hta_reference.py",
        "tracelens_reference.json",
        "make_tracelens_reference.py",
        "tracelens_collectives_reference.json",
        "make_tracelens_collectives.py",
        "tracelens_rocprof_reference.json",
        "make_tracelens_rocprof.py",
        "xplane_reference.json",
        "make_xplane_reference.py",
        "tracelens_timeline_reference.json",
        "make_tracelens_timeline.py",
        "hta_critical_path_reference.json",
        "make_hta_critical_path.py",
        "hta_runs.py",
        "hta_queue_length_reference.json",
        "make_hta_queue_length.py",
        "hta_memory_bw_reference.json",
        "make_hta_memory_bw.py",
        "hta_counters_reference.json",
        "make_hta_counters.py",
        "hta_kernel_sequences_reference.json",
        "make_hta_kernel_sequences.py",
        "hta_annotations_reference.json",
        "make_hta_annotations.py",
    }
)

#: Real traces under fixtures/real/traces that are not Chrome / Kineto JSON: the tests of the Chrome reader's own
#: options (parsers, workers, flows read on use) leave them out.
NOT_CHROME = frozenset({"rocprofv3_mi350_train.json.gz"})

#: Directories that are one run (a rank per file), read as one input.
RUNS = frozenset({"two_ranks", "dlrm_8ranks"})


def real_inputs(*, ranks_one_by_one: bool = False, roots: Iterable[Path] = (REAL,)) -> list[Path]:
    """Every real trace, Poplar summary and log under ``roots`` (those that exist), each run directory as one
    input; with ``ranks_one_by_one`` its rank files too, each as an input of its own."""
    out = []
    for root in roots:
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*")):
            if path.name in NOT_PROFILES or path.name.startswith("LICENSE-"):
                continue
            if path.parent.name in RUNS and not ranks_one_by_one:
                continue
            if path.is_file() or path.name in RUNS:
                out.append(path)
    return out
