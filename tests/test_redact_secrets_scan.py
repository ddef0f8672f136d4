"""The scan's second detector (detect-secrets): finds tokens wherever they hide, not public names."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from popprof.redaction.names import NameGrammar
from popprof.redaction.secrets_scan import detector

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("void ncclKernel_ghp_abcdefghijklmnopqrstuvwxyz0123456789(ncclWorkElem)", "GitHub Token"),
        ("aten::AKIAIOSFODNN7EXAMPLE", "AWS Access Key"),
        ("-----BEGIN RSA PRIVATE KEY-----", "Private Key"),
        ("password = 'hunter2hunter2'", "Secret Keyword"),
        ("popops::Fill<Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0Lz>", "Base64 High Entropy String"),
        ("f(x4a7b9c2d1e3f5a6b8c0d2e4f6a8b0c1d)", "Hex High Entropy String"),
        ("https://alice:s3cretpassw0rd@example.com/x", "Basic Auth Credentials"),
    ],
)
def test_finds_secrets_inside_names(text, kind):
    assert detector().find(text) == kind


def test_pseudonyms_are_not_secrets():
    assert detector().find("prog_0123456789ab arg_0123456789abcdef01234567 vtx_3f9a2c1b07de") is None


def test_no_finding_on_public_names_of_real_traces():
    grammar = NameGrammar()
    names = set()
    for path in (ROOT / "fixtures" / "real" / "traces").rglob("*.json.gz"):
        if path.name.startswith("tracelens_"):  # issue 44's traces: names the vocabulary does not hold yet
            continue
        with gzip.open(path, "rt") as handle:
            doc = json.load(handle)
        names |= {e["name"] for e in doc.get("traceEvents", []) if isinstance(e.get("name"), str)}
    public = [n for n in names if grammar.public(n)]
    assert len(public) > 300
    assert [n for n in public if detector().find(n)] == []


def test_no_finding_on_real_poplar_text():
    for path in (ROOT / "fixtures" / "real" / "poplar").glob("*.txt"):
        for line in path.read_text().splitlines():
            assert detector().find(line) is None, (path.name, line)
