"""A redacted bundle of a TPU profile keeps its TPU ops and its chip kind, under the events' pseudonyms.

On the real XPlane profile of four TPU v6e chips (``fixtures/real/xplane/xprof_tpu_v6e_inference.xplane.pb``):
the ``operations`` rows built from the metadata ``xplane.tpu_ops`` keep their figures, name the ops as the
redacted events name them, still resolve the chip's peak (``xplane.gpus``' ``device_type_string``), and the
independent leak scan passes; an op name of no vocabulary is pseudonymised.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from redact_helpers import KEY_A, bundle_strings  # noqa: E402

import popprof  # noqa: E402
from popprof.metrics import peaks, tpu_operations  # noqa: E402
from popprof.model.profile import Profile  # noqa: E402
from popprof.readers import bundle  # noqa: E402
from popprof.redaction import redact, scan  # noqa: E402
from popprof.redaction.bundle import IDENTIFIER_COLUMNS  # noqa: E402
from popprof.redaction.redactor import Redactor  # noqa: E402
from popprof.rules.operations import roofline_frame  # noqa: E402

TPU = (
    Path(__file__).resolve().parent.parent
    / "fixtures"
    / "real"
    / "xplane"
    / "xprof_tpu_v6e_inference.xplane.pb"
)
#: the numbers of a TPU op row that redaction must not change
FIGURES = ["count", "device_time_us", "flops_per_call", "bytes_per_call", "tflops", "tbps", "bound"]
#: the XPlane reader's name of a copy: ``Memcpy HtoD (<op>)``
COPY = re.compile(r"Memcpy (?:HtoD|DtoH|DtoD|PtoP) \((.+)\)")
SECRET_OP = "secret_customer_fusion.3"
SECRET_HOST = "qzvcanary-tpu-host07.corp.example.com"


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> Path:
    """The real TPU profile as a bundle."""
    out = tmp_path_factory.mktemp("tpu") / "tpu.popprof"
    bundle.write(popprof.open(TPU), out)
    return out


@pytest.fixture(scope="module")
def redacted(original, tmp_path_factory):
    """``(path, report)`` of the bundle redacted with a fixed key."""
    out = tmp_path_factory.mktemp("tpu_red") / "tpu_red.popprof"
    return out, redact(original, out, key=KEY_A)


def _ops(path: Path) -> pd.DataFrame:
    return tpu_operations.tpu_operations(popprof.open(path))


def _by_figures(table: pd.DataFrame) -> pd.DataFrame:
    """The rows sorted by their figures alone (a name's pseudonym must not decide the order)."""
    keys = ["device_time_us", "count", "flops_per_call", "bytes_per_call"]
    return table.sort_values(keys, ascending=False, kind="stable").reset_index(drop=True)


def test_the_rows_keep_their_figures(original, redacted):
    before, after = _ops(original), _ops(redacted[0])
    assert len(before) == 17 and len(after) == len(before)
    pd.testing.assert_frame_equal(_by_figures(before)[FIGURES], _by_figures(after)[FIGURES])
    assert list(_by_figures(after)["category"]) == list(
        _by_figures(before)["category"]
    )  # XLA's words: public


def test_the_op_names_are_the_redacted_events_names(original, redacted):
    red = popprof.open(redacted[0])
    events = red.get("events")
    on_tpu = events[events["device"].astype(str).str.fullmatch(r"tpu:\d+")]
    assert not on_tpu.empty  # the device stays tpu:N, a public word
    names = {(m.group(1) if (m := COPY.fullmatch(n)) else n) for n in on_tpu["name"].astype(str).unique()}
    ops = set(_ops(redacted[0])["name"])
    assert ops == names
    assert any(n.startswith("evt_") for n in ops)  # broadcast_add_fusion.1 and the like: no vocabulary word
    assert "copy-done" in ops and "all-reduce" in ops  # public HLO words stay, as the events' names do
    assert not {"broadcast_add_fusion.1", "copy-done.2"} & ops
    records = json.loads(red.meta[tpu_operations.META_KEY])
    assert {r["device"] for r in records} == {"tpu:0", "tpu:1", "tpu:2", "tpu:3"}
    assert {r["deduplicated_name"] for r in records if r.get("deduplicated_name")} <= ops | {""}


def test_the_chip_still_resolves_its_peak(redacted):
    red = popprof.open(redacted[0])
    assert peaks.profile_device(red) == ("TPU v6 Lite", "TPU v6e")
    assert _ops(redacted[0])["bound"].notna().all()


def test_the_leak_scan_passes(original, redacted):
    out, report = redacted
    assert report.passed
    assert scan(out, original).passed


def test_a_name_of_no_vocabulary_is_pseudonymised_and_a_host_dropped(original, tmp_path):
    prof = popprof.open(original)
    records = json.loads(prof.meta[tpu_operations.META_KEY])
    records.append(
        {
            **records[0],
            "name": SECRET_OP,
            "deduplicated_name": SECRET_OP,
            "hlo_category": "qzvcanary category",
        }
    )
    planes = json.loads(prof.meta["xplane.gpus"])
    planes[0] = {**planes[0], "hostname": SECRET_HOST, "serial": "QZVCANARY-SN-0042"}
    tables = {name: frame for name, frame in prof.tables.items() if name != "metadata"}
    planted = Profile(prof.name, tables, source=prof.source)
    planted.update_metadata(
        {**prof.meta, tpu_operations.META_KEY: json.dumps(records), "xplane.gpus": json.dumps(planes)}
    )
    source, out = tmp_path / "planted.popprof", tmp_path / "planted_red.popprof"
    bundle.write(planted, source)
    report = redact(source, out, key=KEY_A)
    assert report.passed
    assert not [s for s in bundle_strings(out) if "secret_customer" in s or "qzvcanary" in s.lower()]
    red = popprof.open(out)
    expected = Redactor(KEY_A).identifier(IDENTIFIER_COLUMNS[("events", "name")], SECRET_OP)
    assert expected.startswith("evt_")  # the events' own mapping under the same key
    assert expected in set(_ops(out)["name"])
    assert peaks.profile_device(red)[1] == "TPU v6e"


def test_the_roofline_rule_reads_the_same_rows(original, redacted):
    """The rule's frame (the three fusions and the all-reduce, which the rule leaves out by its public category) and
    its finding (none) are the same."""
    before, after = (roofline_frame(popprof.open(p)) for p in (original, redacted[0]))
    columns = ["category", "count", "device_time_us", "efficiency", "roofline_us"]
    assert len(after) == len(before) == 4 and (after["category"] == "loop fusion").sum() == 3
    pd.testing.assert_frame_equal(_by_figures(before)[columns], _by_figures(after)[columns])
    found = popprof.check(popprof.open(redacted[0]))
    assert "operations.below-roofline" in found.evaluated and not found.by_rule("operations.below-roofline")


def test_a_kineto_bundle_keeps_its_gpu_too(tmp_path):
    """The same holds for a Kineto trace's ``chrome.top.deviceProperties``: the GPU (a public model name) stays."""
    trace = TPU.parent.parent / "traces" / "tracelens_b200_vllm_eager.json.gz"
    source, out = tmp_path / "b200.popprof", tmp_path / "b200_red.popprof"
    bundle.write(popprof.open(trace), source)
    assert redact(source, out, key=KEY_A).passed
    assert (
        peaks.profile_device(popprof.open(out)) == peaks.profile_device(popprof.open(source)) != (None, None)
    )


def test_the_copies_still_pair_after_redaction(original, redacted):
    """A copy-done's ``copy_start`` is redacted as the events' names are, so the redacted bundle counts the same
    transfers (each copy-start with its copy-done once) as the original, though no op keeps its name."""
    from popprof.metrics.copies import async_copy_pairs, copy_records

    red = popprof.open(redacted[0])
    before, after = async_copy_pairs(popprof.open(original)), async_copy_pairs(red)
    assert len(after) == len(before) == 24  # six copy-done ops on each of four chips
    assert not {"copy-start.2", "copy-done.2"} & {n for pair in after.items() for n in (pair[0][1], pair[1])}
    counts = [(r["device"], r["direction"], r["count"], r["ops"]) for r in copy_records(red)]
    assert counts == [
        (r["device"], r["direction"], r["count"], r["ops"]) for r in copy_records(popprof.open(original))
    ]
    assert {c[2:] for c in counts} == {(300, 600)}
