"""Helpers for the profile.pop tests: load the double's storage writer and compare tables."""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path
from types import ModuleType

import pandas as pd

PVA_DOUBLE = Path(__file__).resolve().parent / "pva_double"


@cache
def report_store() -> ModuleType:
    """``tests/pva_double/report_store.py``, loaded without putting the double on ``sys.path``."""
    spec = importlib.util.spec_from_file_location("pva_double_report_store", PVA_DOUBLE / "report_store.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assert_table_equal(
    read: pd.DataFrame, expected: pd.DataFrame, sort: list[str] | None = None, skip: tuple[str, ...] = ()
) -> None:
    """Compare two conformed tables column by column (categorical values compared, not category order)."""
    assert list(read.columns) == list(expected.columns)
    assert len(read) == len(expected)
    if sort:
        read = _sorted(read, sort)
        expected = _sorted(expected, sort)
    for column in read.columns:
        if column in skip:
            continue
        left, right = read[column], expected[column]
        assert left.dtype == right.dtype or (
            isinstance(left.dtype, pd.CategoricalDtype) and isinstance(right.dtype, pd.CategoricalDtype)
        ), column
        pd.testing.assert_series_equal(
            left, right, check_categorical=False, check_names=False, obj=f"column {column!r}"
        )


def _sorted(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    order = frame.assign(
        **{k: frame[k].astype("str") for k in keys if isinstance(frame[k].dtype, pd.CategoricalDtype)}
    ).sort_values(keys, kind="stable")
    return frame.loc[order.index].reset_index(drop=True)
