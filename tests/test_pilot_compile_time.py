"""The pilot's compile time on real PyTorch traces: ``torch.compile``'s own ranges count, Python stack frames whose
file or function is named after compilation do not (``docs/pilot.md``, "compile time")."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from popprof.pilot.figures import compile_time_us
from popprof.readers import open_all

TRACES = Path(__file__).parent.parent / "fixtures" / "real" / "traces"

#: Real traces whose Python stack frames name compilation without compiling: a check (``is_compiling``), a
#: wrapper (``torch/_compile.py(41): inner``), vLLM's ``compilation`` package, Python's built-in ``compile``.
FRAMES_ONLY = [
    "tracelens_h100_bert_small.json.gz",
    "tracelens_b200_vllm_eager.json.gz",
    "tracelens_mi300x_normalization.json.gz",
    "tracelens_mi300x_vllm_decode_graph.json.gz",
    "tracelens_mi300x_vllm_graph_capture.json.gz",
]


def _one(path: Path):
    (profile,) = open_all(path).values()
    return profile


@pytest.mark.parametrize("name", FRAMES_ONLY)
def test_python_frames_named_after_compilation_are_no_compile_time(name: str) -> None:
    """Each of these traces has Python frames whose names hold the compile word, and no compilation range: the
    figure is missing (the pilot then says what to capture), not the frames' time."""
    profile = _one(TRACES / name)
    events = profile.events
    frames = events[events["channel"] == "python_function"]["name"].astype(str)
    assert frames.str.contains(r"(?i)compil(?:e|ation|ing)").any()  # the trap is there
    assert compile_time_us(profile) is None


def test_dynamo_timed_ranges_are_the_compile_time(tmp_path: Path) -> None:
    """The BERT trace with ``torch.compile``'s ranges added as PyTorch records them (``record_function`` of
    ``<key> (dynamo_timed)``, a ``user_annotation``), two nested and one apart: the compile time is the union of
    their intervals; the frames beside them still do not count."""
    doc = json.loads(gzip.decompress((TRACES / "tracelens_h100_bert_small.json.gz").read_bytes()))
    events = doc["traceEvents"]
    frame = next(
        e for e in events if e.get("cat") == "python_function" and "is_compiling" in e.get("name", "")
    )
    pid, tid, t0 = frame["pid"], frame["tid"], float(frame["ts"])
    ranges = [
        ("_compile.compile_inner (dynamo_timed)", t0 - 5000.0, 3000.0),
        ("compile_fx_inner (dynamo_timed)", t0 - 4000.0, 1000.0),  # inside the one above
        ("entire_frame_compile (dynamo_timed)", t0 - 1500.0, 500.0),  # apart: 500 us more
    ]
    for name, ts, dur in ranges:
        events.append(
            {"ph": "X", "cat": "user_annotation", "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
        )
    path = tmp_path / "compiled.json"
    path.write_text(json.dumps(doc))
    assert compile_time_us(_one(path)) == pytest.approx(3500.0)
