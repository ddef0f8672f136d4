"""The block cutter's boundary search (``framing._last_cuts``): the last boundaries it lists, from a short tail
first, are the ones a search of the whole last 64 kB finds, on real traces cut anywhere."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from popprof.readers.chrome import framing

TRACES = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"


def _whole_tail(pending: bytes) -> list:
    """What the cutter searched before: every boundary of the last 64 kB, else of all of it."""
    found = list(framing.BOUNDARY.finditer(pending, max(0, len(pending) - (1 << 16))))
    return found or list(framing.BOUNDARY.finditer(pending))


@pytest.mark.parametrize(
    "name", ["kineto2021_resnet50_worker0.pt.trace.json.gz", "tracelens_b200_vllm_eager.json.gz"]
)
def test_the_last_cuts_are_those_of_the_whole_tail(name: str) -> None:
    text = gzip.decompress((TRACES / name).read_bytes())
    view = memoryview(text)
    for end in range(1000, len(text), len(text) // 400 + 1):  # ending anywhere: inside events, strings, args
        pending = view[:end]  # a view: no copy of the file's start per cut
        short, whole = framing._last_cuts(pending), _whole_tail(pending)
        tried = framing.CUTS_TRIED
        assert [m.span() for m in short[-tried:]] == [m.span() for m in whole[-tried:]]
        assert [m.span() for m in short[-2:]] == [m.span() for m in whole[-2:]]


def test_a_tail_with_few_boundaries_widens() -> None:
    """Events longer than the short tail: fewer boundaries there than are tried, so the longer tail is searched."""
    event = b'{"ph": "X", "name": "' + b"a" * 3000 + b'", "ts": 1, "dur": 1}'
    pending = b",\n".join([event] * 40)
    short, whole = framing._last_cuts(pending), _whole_tail(pending)
    assert len(short) >= framing.CUTS_TRIED
    assert [m.span() for m in short] == [m.span() for m in whole]
