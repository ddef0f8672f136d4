"""Properties of the text summary reader: any layout reads back the same figures; any cut is handled."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from popprof.model.errors import InputError
from popprof.readers import text_summary as reader
from popprof.testing import synth
from popprof.testing.writers.text_summary import Layout, render_text_summary, summary_totals

PROFILE = synth.make_profile(
    num_ipus=1, oom_tiles=1, num_steps=10, num_programs=12, num_liveness_steps=10, num_variables=5, seed=5
)
TEXT = render_text_summary(PROFILE, show_execution_steps=True)


def figures(frame) -> dict:
    tiles = frame["tile"].astype("Int64").fillna(-1).astype(int)
    return dict(
        zip(
            zip(tiles, frame["group"].astype(str), frame["category"].astype(str), strict=True),
            frame["bytes"].astype(int),
            strict=True,
        )
    )


EXPECTED = figures(summary_totals(PROFILE))

layouts = st.builds(
    Layout,
    indent=st.integers(1, 6),
    value_column=st.integers(0, 80),
    value_width=st.integers(0, 20),
    blank_lines=st.integers(0, 3),
    excluding_total_line=st.booleans(),
    vertex_type_colon=st.booleans(),
    histogram_bins=st.integers(4, 40),
    newline=st.sampled_from(["\n", "\r\n"]),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layout=layouts)
def test_any_layout_reads_back_the_same_figures(tmp_path, layout):
    path = tmp_path / "s.txt"
    path.write_bytes(render_text_summary(PROFILE, layout=layout).encode())
    back = reader.read(path)
    assert figures(back.memory_totals) == EXPECTED
    assert back.meta["tiles_out_of_memory"] == "1"
    assert int(back.tile_histogram["num_tiles"].sum()) == 1472
    assert back.meta["text_summary.unrecognised_count"] == "0"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, len(TEXT)))
def test_any_cut_gives_a_subset_or_a_clear_error(tmp_path, cut):
    path = tmp_path / "cut.txt"
    path.write_text(TEXT[:cut])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", reader.TruncatedSummaryWarning)
            back = reader.read(path)
    except InputError:
        return
    if back.has("memory_totals"):
        got = figures(back.memory_totals)
        assert all(EXPECTED.get(key) == value for key, value in got.items()), (
            "a cut must never change a figure"
        )


@pytest.mark.parametrize("junk", ["\x00\x01\x02", "Target:\n\x00", '{"graphProfile": 1}', "Target:"])
def test_junk_is_an_input_error(tmp_path, junk):
    path = tmp_path / "junk.txt"
    path.write_text(junk)
    with pytest.raises(InputError):
        reader.read(path)
