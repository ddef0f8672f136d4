"""Shared test set-up: the pva test double on sys.path, and the fixtures directory."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
PVA_DOUBLE = Path(__file__).resolve().parent / "pva_double"


@pytest.fixture
def pva_double(monkeypatch):
    """Make ``import pva`` find the test double (only inside the test that asks for it)."""
    monkeypatch.syspath_prepend(str(PVA_DOUBLE))
    sys.modules.pop("pva", None)
    import pva

    yield pva
    sys.modules.pop("pva", None)


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES
