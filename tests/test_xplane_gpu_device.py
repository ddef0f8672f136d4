"""An XPlane GPU plane's device named by its own stats (compute capability, cores, memory, clock), as a Kineto
trace's nameless GPU is by its ``deviceProperties`` (metrics/peaks.py), on the real XPlane fixtures."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import popprof
from popprof.cli import cli
from popprof.metrics import peaks
from popprof.readers import bundle
from popprof.readers.xplane import proto
from popprof.redaction import redact, scan

sys.path.insert(0, str(Path(__file__).parent))
from redact_helpers import KEY_A  # noqa: E402

XPLANE = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "xplane"
MI355X = XPLANE / "tracelens_te_fused_attn_mi355x.xplane.pb"
GFX950_STATS = {
    "gpu": 0,
    "device_vendor": "AMD",
    "clock_rate": 2400000,
    "core_count": 256,
    "memory_bandwidth": 4096000000000,
    "memory_size": 309220868096,
    "compute_cap_major": 9,
    "compute_cap_minor": 5,
}


@pytest.mark.parametrize(
    ("name", "stats", "device"),
    [
        ("jax06_conv_mi300x", (9, 4, 304, 206141652992, 2100000), ("AMD Instinct MI300X", "MI300X")),
        ("jax08_conv_mi300x", (9, 4, 304, 206141652992, 2100000), ("AMD Instinct MI300X", "MI300X")),
        (
            "tracelens_te_fused_attn_mi355x",
            (9, 5, 256, 309220868096, 2400000),
            ("AMD Instinct MI355X", "MI355X"),
        ),
    ],
)
def test_a_gpu_plane_has_no_name_and_is_named_by_its_stats(name, stats, device):
    """The GPU planes record vendor, clock, cores, memory and compute capability, never a model name; those
    stats name the GPU through the signature table, and the MI355X's 2400 MHz clock tells it from an MI350X."""
    profile = popprof.open(XPLANE / f"{name}.xplane.pb")
    planes = peaks.xplane_devices(profile)
    assert planes and all(p["device_vendor"] == "AMD" for p in planes)
    assert not any("name" in key or "device_type" in key for p in planes for key in p)
    first = planes[0]
    keys = ("compute_cap_major", "compute_cap_minor", "core_count", "memory_size", "clock_rate")
    assert tuple(first[k] for k in keys) == stats
    assert peaks.profile_device(profile) == device
    assert peaks.device_section(profile) == {"name": device[0], "named_by": "properties", "peaks": device[1]}


@pytest.mark.parametrize(
    ("change", "name"),
    [
        ({}, "AMD Instinct MI355X"),
        ({"clock_rate": 2200000}, "AMD Instinct MI350X"),  # the MI350X's peak engine clock
        ({"clock_rate": 2300000}, "AMD Instinct MI350X or MI355X"),  # a clock of neither: not a guess
        ({"clock_rate": None}, "AMD Instinct MI350X or MI355X"),  # no clock, as in a Kineto trace
        ({"core_count": 304}, ""),  # no such gfx950
        ({"memory_size": None}, ""),  # GPUs 1-7 of that file: vendor only
        ({"device_type_string": "TPU v6 Lite"}, "TPU v6 Lite"),  # a TPU plane keeps its chip kind
    ],
)
def test_the_clock_decides_only_between_rows_that_name_it(change, name):
    plane = {k: v for k, v in {**GFX950_STATS, **change}.items() if v is not None}
    assert peaks.xplane_name(plane) == name


def _with_clock(tmp_path: Path, khz: int) -> Path:
    """The MI355X XPlane with GPU 0's ``clock_rate`` stat set to ``khz``."""
    space = proto.xspace_class()()
    space.ParseFromString(MI355X.read_bytes())
    plane = next(p for p in space.planes if p.name == "/device:GPU:0")
    (clock_id,) = [k for k, m in plane.stat_metadata.items() if m.name == "clock_rate"]
    (stat,) = [s for s in plane.stats if s.metadata_id == clock_id]
    stat.ClearField(stat.WhichOneof("value"))
    stat.uint64_value = khz
    out = tmp_path / "clocked.xplane.pb"
    out.write_bytes(space.SerializeToString())
    return out


@pytest.mark.parametrize(
    ("khz", "line"),
    [
        (2400000, "Roofline device: AMD Instinct MI355X (named by its properties); peaks: MI355X"),
        (2200000, "Roofline device: AMD Instinct MI350X (named by its properties); peaks: MI350X"),
        (2300000, "Roofline device: AMD Instinct MI350X or MI355X (named by its properties); no"),
    ],
)
def test_the_summary_says_the_device_in_text_and_json(tmp_path, khz, line):
    path = _with_clock(tmp_path, khz)
    runner = CliRunner()
    text = runner.invoke(cli, ["summary", str(path), "-q"], env={"COLUMNS": "80"})
    assert text.exit_code == 0, text.output[-2000:]
    lines = text.stdout.splitlines()
    assert any(entry.strip().startswith(line) for entry in lines), [e for e in lines if "Roofline" in e]
    assert max(map(len, lines)) <= 80
    result = runner.invoke(cli, ["summary", str(path), "-q", "--format", "json"])
    assert result.exit_code == 0, result.output[-2000:]
    device = json.loads(result.stdout)["roofline_device"]
    assert device["named_by"] == "properties" and device["name"] in line
    if khz == 2300000:
        assert device["peaks"] is None and device["no_peaks"] == "its properties fit GPUs whose peaks differ"
    else:
        assert device["peaks"] == line.rsplit(" ", 1)[1]


def test_a_named_gpu_says_so_and_an_unknown_one_says_why():
    """A Kineto trace that names its GPU (TraceLens's MI300X compile trace): named by its name; the MI250 toy's
    generic 'AMD Radeon Graphics' gives way to its properties."""
    traces = XPLANE.parent / "traces"
    named = peaks.device_section(popprof.open(traces / "tracelens_mi300x_torch_compile_triton.json.gz"))
    assert named == {"name": "AMD Instinct MI300X", "named_by": "name", "peaks": "MI300X"}
    toy = peaks.device_section(popprof.open(traces / "amd_mi250_minitoy.json.gz"))
    assert toy == {
        "name": "AMD Instinct MI210 or MI250 (one GCD)",
        "named_by": "properties",
        "peaks": "MI210",
    }


def test_a_redacted_bundle_still_names_its_gpu(tmp_path):
    """Redaction keeps the GPU plane's stat names (public xplane_schema names) and their numbers, so the
    redacted bundle of the MI355X XPlane still names its GPU and resolves its peaks; the vendor string is
    decided like any value, and the independent leak scan passes."""
    original = tmp_path / "mi355x.popprof"
    bundle.write(popprof.open(MI355X), original)
    out = tmp_path / "mi355x_red.popprof"
    redact(original, out, key=KEY_A)
    profile = popprof.open(out)
    (first, *_) = peaks.xplane_devices(profile)
    assert {k: first[k] for k in GFX950_STATS if k != "device_vendor"} == {
        k: v for k, v in GFX950_STATS.items() if k != "device_vendor"
    }
    assert peaks.profile_device(profile) == ("AMD Instinct MI355X", "MI355X")
    assert scan(out, original).passed


def test_the_html_report_says_the_roofline_device_as_the_summary_does(tmp_path):
    """The report's GPU operators carry the same sentence as the text summary, from the summary's
    ``roofline_device`` (vLLM's ROCm 7 decode trace: no name, named by its properties)."""
    trace = XPLANE.parent / "traces" / "tracelens_mi300x_vllm_decode_graph.json.gz"
    out = tmp_path / "r.html"
    assert CliRunner().invoke(cli, ["report", str(trace), "--no-plots", "-o", str(out)]).exit_code == 0
    html = out.read_text("utf-8")
    sentence = "Roofline device: AMD Instinct MI300X (named by its properties); peaks: MI300X"
    assert f'<p class="note roofline-device">{sentence}.</p>' in html
    text = CliRunner().invoke(cli, ["summary", str(trace)]).stdout
    assert sentence in " ".join(text.split())
