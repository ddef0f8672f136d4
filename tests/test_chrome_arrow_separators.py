"""The Arrow path's separator blanking (``arrow._blank_separators``) against the two ``bytes.replace`` it stands for."""

from __future__ import annotations

import gzip
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from popprof.readers.chrome import arrow

ROOT = Path(__file__).resolve().parent.parent
COMPACT, KINETO = (b"},\n{", b"} \n{"), (b"},\n  {", b"} \n  {")


def _replaced(text: bytes) -> bytes:
    return text.replace(*COMPACT).replace(*KINETO)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.sampled_from([b",", b"\n", b" ", b"{", b"}", b"a", b'"', b"},\n{", b"},\n  {", b"},\n "]),
        max_size=60,
    )
)
def test_the_same_bytes_as_the_two_replaces(pieces: list[bytes]) -> None:
    text = b"".join(pieces)
    assert bytes(arrow._blank_separators(text)) == _replaced(text)


def test_the_same_bytes_on_real_and_generated_layouts() -> None:
    kineto = gzip.decompress(
        (ROOT / "fixtures/real/traces/kineto2021_resnet50_worker0.pt.trace.json.gz").read_bytes()
    )
    compact = (
        b'{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":2},\n{"ph":"X","name":"b,\\n{","pid":1}' * 50
    )
    for text in (kineto, compact, b"", b"}", b"},\n", b"},\n  "):
        assert bytes(arrow._blank_separators(text)) == _replaced(text)
    assert arrow._blank_separators(kineto).count(b"},\n  {") == 0  # every Kineto separator was blanked


def test_both_layouts_read_as_whitespace_separated_events() -> None:
    for sep in (b",\n", b",\n  ", b", "):  # the last: another layout, read after the regular-expression pass
        text = sep.join(b'{"ph":"X","name":"k%d","pid":1,"tid":2,"ts":%d,"dur":1}' % (i, i) for i in range(5))
        table, covered = arrow.parse_block(text)
        assert covered == len(text) and table.column("name").to_pylist() == [f"k{i}" for i in range(5)]
