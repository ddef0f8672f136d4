"""The schema is enforced in one place: conform() gives every table its declared columns and dtypes."""

from __future__ import annotations

import pandas as pd
import pytest

from popprof.model.profile import Profile
from popprof.model.schema import TABLES, category_of_program_type, conform, empty_table, schema_markdown


@pytest.mark.parametrize("table", list(TABLES))
def test_empty_table_has_declared_columns_and_dtypes(table):
    frame = empty_table(table)
    expected = [c for c in TABLES[table].columns if not c.optional]
    assert list(frame.columns) == [c.name for c in expected]
    for col in expected:
        assert str(frame[col.name].dtype) == col.dtype


def test_conform_fills_unknown_nullable_columns_and_casts():
    frame = conform(
        "tiles", {"tile": [0, 1], "ipu": [0, 0], "tile_in_ipu": [0, 1], "bytes_incl_gaps": [10, 20.0]}
    )
    assert frame["bytes_incl_gaps"].dtype == "Int64"
    assert frame["bytes_incl_gaps"].tolist() == [10, 20]
    assert frame["capacity_bytes"].isna().all()
    assert frame["tile"].dtype == "int32" and frame["ipu"].dtype == "int16"


def test_conform_rejects_unknown_and_missing_key_columns():
    with pytest.raises(ValueError, match="unknown columns"):
        conform("runs", {"run": [0], "bogus": [1]})
    with pytest.raises(ValueError, match="required column 'tile'"):
        conform("tiles", {"ipu": [0], "tile_in_ipu": [0]})
    with pytest.raises(ValueError, match="missing values"):
        conform("runs", {"run": pd.array([0, None], dtype="Int64")})


def test_categories_are_strings_even_from_numbers():
    frame = conform("memory_totals", {"group": ["total"], "category": pd.Categorical([3]), "bytes": [1]})
    assert frame["category"].cat.categories.dtype == "str"
    assert frame["category"].iloc[0] == "3"


def test_program_type_categories_follow_the_reference_facts():
    types = pd.Series(
        [
            "OnTileExecute",
            "DoExchange",
            "GlobalExchange",
            "StreamCopyMid",
            "SyncAns",
            "Repeat",
            "SomethingNew",
        ]
    )
    assert category_of_program_type(types).tolist() == [
        "compute",
        "exchange",
        "global_exchange",
        "host_io",
        "sync",
        "other",
        "other",
    ]


def test_profile_reports_missing_tables_with_what_they_need():
    profile = Profile("p", {"target": {"source_format": ["x"]}})
    assert not profile.has("steps")
    with pytest.raises(KeyError, match="needs an execution profile"):
        _ = profile.steps


def test_schema_doc_is_current():
    """docs/schema.md embeds the generated schema; regenerate with `python -m popprof.model.schema`."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parent.parent / "docs" / "schema.md").read_text("utf-8")
    assert schema_markdown().strip() in doc
