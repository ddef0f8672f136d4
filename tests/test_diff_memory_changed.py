"""``popprof diff``'s "What changed in memory": the change of all tiles' memory including gaps split into the
``tile_memory`` categories, the always-live and not-always-live variables and the gaps, the fullest tile's change
split the same way, and the variables that changed most (docs/diff.md, "What changed: memory").

The expected figures are recomputed here from the bundles' Parquet files, never read back from the block. Inputs:
the IPU pair ``fixtures/mk2_training.popprof`` / ``mk2_training_v2.popprof`` (tiles 0-99 gain 16,384 B of
always-live memory each: a new variable of 1,638,400 B, fixtures/README.md), ``pod4_pipeline.popprof``, and
variants of them written to ``tmp_path`` by editing their tables.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

import popprof
from popprof.cli import main
from popprof.compare.document import to_dict
from popprof.compare.memory_changed import noise_floor
from popprof.compare.memory_parts import GAPS, OTHER
from popprof.io import units
from popprof.report.diff import render_markdown, render_text

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
BASE = FIXTURES / "mk2_training.popprof"
NEW = FIXTURES / "mk2_training_v2.popprof"
POD = FIXTURES / "pod4_pipeline.popprof"
HTA_BASE = FIXTURES / "real" / "traces" / "hta_trace_compare_base.json.gz"
HTA_NEW = FIXTURES / "real" / "traces" / "hta_trace_compare_test.json.gz"


def _table(bundle: Path, name: str) -> pd.DataFrame:
    return pd.read_parquet(bundle / f"{name}.parquet")


def _totals(bundle: Path) -> dict[str, int]:
    """Bytes of all tiles by part, from the bundle's files: each category, the liveness bytes and the gaps."""
    tiles, memory = _table(bundle, "tiles"), _table(bundle, "tile_memory")
    parts = {str(c): int(b) for c, b in memory.groupby("category", observed=True)["bytes"].sum().items()}
    parts["always_live_variables"] = int(tiles["always_live_bytes"].sum())
    parts["not_always_live_variables"] = int(tiles["not_always_live_bytes"].sum())
    parts[GAPS] = int((tiles["bytes_incl_gaps"] - tiles["bytes_excl_gaps"]).sum())
    return parts


def _variant(src: Path, folder: Path, name: str, edit) -> Path:
    """A copy of the bundle ``src`` whose tables ``edit(tables)`` changed (``tables``: name -> frame, edited in
    place), its manifest's row counts kept true."""
    out = folder / f"{name}.popprof"
    shutil.copytree(src, out)
    manifest = json.loads((out / "manifest.json").read_text())
    tables = {t: _table(out, t) for t in ("tiles", "tile_memory", "variables")}
    edit(tables)
    for t, frame in tables.items():
        frame.to_parquet(out / f"{t}.parquet", index=False)
        manifest["tables"][t]["rows"] = len(frame)
    manifest["profile_name"] = name
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


@pytest.fixture(scope="module")
def ipu():
    return popprof.diff(popprof.open(BASE), popprof.open(NEW))


def _flat(text: str) -> str:
    return " ".join(text.split())


def _doc(result) -> dict:
    return to_dict(result)["memory_changed"]


# -- the partition ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bundle", [BASE, NEW, POD, FIXTURES / "mk2_oom.popprof"])
def test_categories_liveness_and_gaps_partition_each_tile(bundle: Path) -> None:
    """The relation the block rests on: bytes_excl_gaps = sum of the tile's categories + always-live +
    not-always-live bytes, exactly, on every tile; bytes_incl_gaps adds the gaps."""
    tiles, memory = _table(bundle, "tiles").set_index("tile"), _table(bundle, "tile_memory")
    categories = memory.groupby("tile")["bytes"].sum().reindex(tiles.index, fill_value=0)
    excl = categories + tiles["always_live_bytes"] + tiles["not_always_live_bytes"]
    assert (excl == tiles["bytes_excl_gaps"]).all()
    split = popprof.diff(popprof.open(bundle), popprof.open(bundle)).memory
    assert OTHER not in split.parts  # nothing beyond the categories and the variables
    for frame in (split.base, split.new):
        summed = frame[list(split.parts)].sum(axis=1)
        assert (summed.to_numpy() == tiles["bytes_incl_gaps"].to_numpy()).all()


# -- the IPU pair -------------------------------------------------------------------------------------------------


def test_ipu_pair_parts_sum_to_the_total_change(ipu) -> None:
    doc = _doc(ipu)
    base, new = _totals(BASE), _totals(NEW)
    total_base = int(_table(BASE, "tiles")["bytes_incl_gaps"].sum())
    total_new = int(_table(NEW, "tiles")["bytes_incl_gaps"].sum())
    assert (
        sum(base.values()) == total_base and sum(new.values()) == total_new
    )  # the partition, from the files
    assert doc["total"] == {
        "base_bytes": total_base,
        "new_bytes": total_new,
        "change_bytes": total_new - total_base,
        "rel_change": pytest.approx((total_new - total_base) / total_base),
    }
    assert doc["total"]["change_bytes"] == 1_638_400
    # the parts' changes and the rest sum to the total's change exactly (integers)
    assert sum(p["change_bytes"] for p in doc["parts"]) + doc["rest_bytes"] == doc["total"]["change_bytes"]
    # the same total as the metrics table's
    metrics = ipu.metrics.set_index("name")
    assert metrics.loc["memory.total_incl_gaps_bytes", "abs_change"] == doc["total"]["change_bytes"]
    (top,) = doc["parts"]
    assert top["part"] == "always_live_variables" and top["kind"] == "variables"
    assert top["change_bytes"] == new["always_live_variables"] - base["always_live_variables"] == 1_638_400
    assert top["share_of_change"] == 1.0 and not top["offsetting"]
    assert doc["noise_bytes"] == noise_floor(total_base) == 1024


def test_ipu_pair_fullest_tile_and_variables(ipu) -> None:
    doc = _doc(ipu)
    tiles = _table(BASE, "tiles")
    fullest = int(tiles.loc[tiles["bytes_incl_gaps"].idxmax(), "tile"])
    tile = doc["fullest_tile"]
    assert (
        tile["base"]
        == tile["new"]
        == {
            "tile": fullest,
            "ipu": 0,
            "bytes": int(tiles["bytes_incl_gaps"].max()),
        }
    )
    assert not tile["moved"] and tile["total"]["change_bytes"] == 0 and not tile["material"]
    variables = doc["variables"]
    assert variables["direction"] == "grew" and variables["changed"] == 1
    assert variables["rows"] == [
        {
            "name": "encoder/layer_0/attention/self/weights_v2",
            "base_bytes": 0,
            "new_bytes": 1_638_400,
            "change_bytes": 1_638_400,
            "status": "added",
            "always_live": True,
        }
    ]


def test_ipu_pair_text_block(ipu) -> None:
    text = render_text(ipu, width=80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    at = lines.index("What changed in memory (memory of all tiles, including gaps)")
    assert lines.index("What changed (the time account: device windows summed over devices)") < at
    assert lines[at + 1 : at + 7] == [
        "  total 494.9 MiB -> 496.5 MiB: +1.563 MiB (+0.32 %), of which:",
        "  part                       change  of the change",
        "  always-live variables  +1.563 MiB        100.0 %",
        "  fullest tile: tile 289 (IPU 0): 594.7 KiB, unchanged",
        "  variables that grew or appeared most (1 changed):",
        "    +1.563 MiB  added  encoder/layer_0/attention/self/weights_v2",
    ]


def test_ipu_pair_markdown_and_json(ipu, capsys) -> None:
    markdown = render_markdown(ipu)
    assert (
        "**What changed in memory** (memory of all tiles, including gaps): 518,974,905 B (494.9 MiB) → "
        "520,613,305 B (496.5 MiB): +1,638,400 B (+1.6 MiB) (+0.32 %), of which:" in markdown
    )
    assert "- always-live variables: +1,638,400 B (+1.6 MiB) (100.0 % of the change)" in markdown
    assert "`encoder/layer_0/attention/self/weights_v2` +1,638,400 B (+1.6 MiB) (added)" in markdown
    assert main(["diff", str(BASE), str(NEW), "--no-gate", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)["memory_changed"]
    assert set(doc) == {
        "available",
        "total",
        "noise_bytes",
        "total_moved",
        "material",
        "parts",
        "rest_bytes",
        "fullest_tile",
        "variables",
    }
    assert set(doc["parts"][0]) == {
        "part",
        "kind",
        "words",
        "base_bytes",
        "new_bytes",
        "change_bytes",
        "share_of_change",
        "offsetting",
    }
    assert doc["total"]["change_bytes"] == 1_638_400 and doc["available"]


# -- variants -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def moved(tmp_path_factory) -> tuple[Path, dict]:
    """mk2_training_v2 with tile 5 grown past the fullest tile: +300,000 B of vertexCode, +4,000 B of gaps."""
    planted = {"tile": 5, "code": 300_000, "gaps": 4_000}

    def edit(tables: dict[str, pd.DataFrame]) -> None:
        tiles, memory = tables["tiles"], tables["tile_memory"]
        row = tiles["tile"] == planted["tile"]
        tiles.loc[row, "bytes_excl_gaps"] += planted["code"]
        tiles.loc[row, "bytes_incl_gaps"] += planted["code"] + planted["gaps"]
        memory.loc[(memory["tile"] == planted["tile"]) & (memory["category"] == "vertexCode"), "bytes"] += (
            planted["code"]
        )

    return _variant(NEW, tmp_path_factory.mktemp("memory_changed"), "moved", edit), planted


def test_the_fullest_tile_moved(moved) -> None:
    path, planted = moved
    result = popprof.diff(popprof.open(BASE), popprof.open(path))
    doc = _doc(result)
    base_tiles, new_tiles = _table(BASE, "tiles"), _table(path, "tiles")
    tile = doc["fullest_tile"]
    assert tile["moved"] and tile["base"]["tile"] == 289 and tile["new"]["tile"] == planted["tile"]
    assert tile["base"]["bytes"] == int(base_tiles["bytes_incl_gaps"].max())
    assert tile["new"]["bytes"] == int(new_tiles["bytes_incl_gaps"].max())
    change = tile["new"]["bytes"] - tile["base"]["bytes"]
    assert tile["total"]["change_bytes"] == change
    assert sum(p["change_bytes"] for p in tile["parts"]) + tile["rest_bytes"] == change
    # new's fullest tile against base's, part by part: recomputed from the files
    b_mem, n_mem = _table(BASE, "tile_memory"), _table(path, "tile_memory")
    b_code = int(b_mem[(b_mem["tile"] == 289) & (b_mem["category"] == "vertexCode")]["bytes"].sum())
    n_code = int(
        n_mem[(n_mem["tile"] == planted["tile"]) & (n_mem["category"] == "vertexCode")]["bytes"].sum()
    )
    parts = {p["part"]: p["change_bytes"] for p in tile["parts"]}
    assert parts["vertexCode"] == n_code - b_code
    # the whole: the planted bytes in their parts, next to the always-live growth
    whole = {p["part"]: p["change_bytes"] for p in doc["parts"]}
    assert whole == {
        "always_live_variables": 1_638_400,
        "vertexCode": planted["code"],
        "gaps": planted["gaps"],
    }
    assert doc["total"]["change_bytes"] == 1_638_400 + planted["code"] + planted["gaps"]
    assert doc["parts"][0]["part"] == "always_live_variables"
    text = render_text(result, width=80)
    assert "  fullest tile: tile 289 (IPU 0) -> tile 5 (IPU 0), the fullest tile moved:" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_an_offsetting_part_and_shrinking_variables(tmp_path) -> None:
    """pod4_pipeline with one always-live variable halved and its bytes taken from the tiles' always-live bytes,
    while gaps grow by more on other tiles: the variables' part offsets the total's growth."""
    variables = _table(POD, "variables")
    halved = variables.loc[variables["bytes"].idxmax()]
    cut = int(halved["bytes"]) // 2
    tiles = _table(POD, "tiles")
    per_tile = cut // len(tiles)

    def edit(tables: dict[str, pd.DataFrame]) -> None:
        t, v = tables["tiles"], tables["variables"]
        v.loc[v["name"] == halved["name"], "bytes"] -= cut
        t["always_live_bytes"] -= per_tile
        t["bytes_excl_gaps"] -= per_tile
        t["bytes_incl_gaps"] += 3 * per_tile - per_tile  # the gaps grow by 3 x what the variables free

    new = _variant(POD, tmp_path, "pod4_offset", edit)
    doc = _doc(popprof.diff(popprof.open(POD), popprof.open(new)))
    n = len(tiles)
    assert doc["total"]["change_bytes"] == 2 * per_tile * n
    parts = {p["part"]: p for p in doc["parts"]}
    assert set(parts) == {"gaps", "always_live_variables"}
    assert parts["gaps"]["change_bytes"] == 3 * per_tile * n and parts["gaps"]["share_of_change"] == 1.5
    assert parts["always_live_variables"]["offsetting"]
    assert parts["always_live_variables"]["share_of_change"] == -0.5
    assert doc["parts"][0]["part"] == "gaps"
    assert sum(p["change_bytes"] for p in doc["parts"]) + doc["rest_bytes"] == doc["total"]["change_bytes"]
    # the total grew: the variables listed are those that grew (none did)
    assert doc["variables"]["direction"] == "grew" and doc["variables"]["rows"] == []
    assert doc["variables"]["changed"] == 1


def test_a_change_within_noise_is_one_line(tmp_path) -> None:
    def edit(tables: dict[str, pd.DataFrame]) -> None:
        tables["tiles"].loc[tables["tiles"]["tile"] == 7, "bytes_incl_gaps"] += (
            512  # 512 B more gaps on a tile
        )

    new = _variant(BASE, tmp_path, "noise", edit)
    result = popprof.diff(popprof.open(BASE), popprof.open(new))
    doc = _doc(result)
    assert doc["total"]["change_bytes"] == 512 and not doc["material"] and doc["parts"] == []
    assert doc["rest_bytes"] == 512
    text = render_text(result, width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert (
        "What changed in memory: no material change (all tiles 494.9 MiB; no part moved by 1,024 B (1 KiB) or more)"
        in _flat(text)
    )


def test_one_side_without_categories_and_neither(tmp_path) -> None:
    src = tmp_path / "no_categories.popprof"
    shutil.copytree(BASE, src)
    manifest = json.loads((src / "manifest.json").read_text())
    del manifest["tables"]["tile_memory"]
    (src / "tile_memory.parquet").unlink()
    (src / "manifest.json").write_text(json.dumps(manifest))
    result = popprof.diff(popprof.open(src), popprof.open(NEW))
    assert _doc(result) == {
        "available": False,
        "reason": "the base profile has no per-tile memory by category (tile_memory)",
    }
    assert (
        "What changed in memory: not explained here: the base profile has no per-tile memory by category "
        "(tile_memory)" in _flat(render_text(result, width=80))
    )
    # neither side: nothing said, no JSON key (a GPU trace pair)
    gpu = popprof.diff(popprof.open(HTA_BASE), popprof.open(HTA_NEW))
    assert "memory_changed" not in to_dict(gpu)
    assert "in memory" not in render_text(gpu, width=80) and "in memory" not in render_markdown(gpu)


def test_a_baseline_against_a_full_profile(tmp_path, capsys) -> None:
    """A baseline holds metrics only: its memory metrics are compared, the block says in one line why it cannot
    split them; two baselines have no block."""
    baseline = tmp_path / "baseline.json"
    assert main(["baseline", str(BASE), "-o", str(baseline)]) == 0
    capsys.readouterr()
    result = popprof.diff(baseline, NEW)
    assert _doc(result) == {
        "available": False,
        "reason": "the base side is a baseline (metrics only), without per-tile memory",
    }
    metrics = result.metrics.set_index("name")
    assert metrics.loc["memory.total_incl_gaps_bytes", "abs_change"] == 1_638_400
    assert main(["diff", str(baseline), str(NEW), "--no-gate"]) == 0
    out = capsys.readouterr().out
    assert "What changed in memory: not explained here: the base side is a baseline" in _flat(out)
    assert "memory_changed" not in to_dict(popprof.diff(baseline, baseline))


# -- JUnit: a failed memory figure carries the block ---------------------------------------------------------------


def _junit_failures(capsys, *args: str) -> dict:
    """``popprof diff BASE NEW --format junit`` (the gate on, its default budget) as test case name -> failure."""
    import xml.etree.ElementTree as ET

    assert main(["diff", str(BASE), str(NEW), "--format", "junit", *args]) == 1
    root = ET.fromstring(capsys.readouterr().out)
    return {case.get("name"): case.find("failure") for case in root.iter("testcase")}


def test_junit_failure_of_a_memory_figure_holds_the_memory_block(ipu, capsys) -> None:
    """The gate fails ``memory.always_live_bytes`` on the mk2 pair (+1.37 %, budget +1 %): its failure keeps its
    one-line message and its text adds the text output's "What changed in memory" block under it, at the text's
    width; a time figure's failure holds the time block and not the memory block."""
    from popprof.report.diff_blocks import render_memory_changed, render_what_changed

    failures = _junit_failures(capsys)
    memory, cycles = failures["memory.always_live_bytes"], failures["execution.total_cycles"]
    block = "\n".join(render_memory_changed(ipu))
    assert block.startswith("What changed in memory (") and "+1.563 MiB  added  " in block
    assert memory.text == memory.get("message") + "\n\n" + block
    assert "\n" not in memory.get("message")
    assert all(len(line) <= 80 for line in memory.text.splitlines()[1:])
    assert "What changed (the time account" not in memory.text
    assert cycles.text == cycles.get("message") + "\n\n" + "\n".join(render_what_changed(ipu))
    assert "What changed in memory" not in cycles.text
    # the block is the one the text output prints
    assert main(["diff", str(BASE), str(NEW), "--no-gate"]) == 0
    assert block in capsys.readouterr().out


def test_junit_blocks_by_figure() -> None:
    """Which block a failure carries: ``memory.*_bytes`` the memory block, a time, cycles or a share of the time
    the time block, a share of memory or the tiles out of memory the memory block, a tile index or a step neither."""
    from popprof.report.diff import junit_block

    assert junit_block("memory.always_live_bytes", "bytes") == "memory"
    assert junit_block("memory.category.vertexCode_bytes", "bytes") == "memory"
    assert junit_block("memory.max_tile_incl_gaps_bytes", "bytes") == "memory"
    assert junit_block("execution.total_cycles", "cycles") == "time"
    assert junit_block("execution.share.exchange", "share") == "time"
    assert junit_block("trace.step_time_us", "us") == "time"
    # the shares of memory and the tiles out of memory are figures the memory block explains
    assert junit_block("memory.gap_share", "share") == "memory"
    assert junit_block("memory.max_tile_utilisation", "share") == "memory"
    assert junit_block("memory.tiles_out_of_memory", "tiles") == "memory"
    # a tile's index or the liveness peak's step is not an amount: no block
    assert junit_block("memory.max_tile_index", "tile") is None
    assert junit_block("memory.peak_liveness_step", "step") is None
    assert junit_block("trace.device_memory_peak_bytes", "bytes") == "device memory"  # the allocator peak


def test_junit_memory_failure_without_the_block_is_its_message(tmp_path, capsys) -> None:
    """Against a baseline (metrics only: the tiles explain nothing) the failure of ``memory.always_live_bytes``
    is its message alone, with no "not explained" line."""
    import xml.etree.ElementTree as ET

    baseline = tmp_path / "base.json"
    assert main(["baseline", str(BASE), "-o", str(baseline)]) == 0
    capsys.readouterr()
    assert main(["diff", str(baseline), str(NEW), "--format", "junit"]) == 1
    root = ET.fromstring(capsys.readouterr().out)
    failures = {case.get("name"): case.find("failure") for case in root.iter("testcase")}
    memory = failures["memory.always_live_bytes"]
    assert memory.text == memory.get("message")


# -- Markdown and text agree on every figure -----------------------------------------------------------------------

_MD_BYTES = re.compile(r"([+-]?)(\d[\d,]*) B(?: \([+-]?[\d.,]+ [KMGTP]iB\))?")
_TEXT_BYTES = re.compile(r"[+-]?\d[\d,.]* (?:B|KiB|MiB|GiB|TiB|PiB)\b")
_SHARES = re.compile(r"[+-]?\d[\d,.]* (?:%|pp)")
_TILES = re.compile(r"tile (\d+) \(IPU (\d+)\)")


def _md_bytes(line: str) -> list[str]:
    """The Markdown's exact byte counts in the text's form (4 significant figures, signed where they are)."""
    return [
        units.bytes_figures(int(digits.replace(",", "")) * (-1 if sign == "-" else 1), signed=bool(sign))
        for sign, digits in _MD_BYTES.findall(line)
    ]


def _sections(text_block: list[str], md_block: list[str]) -> list[tuple[str, str, str]]:
    """The block's sections as (name, text lines, Markdown lines): the total, the parts, the fullest tile, the
    variables."""
    text = [line.strip() for line in text_block]
    tile_at = next(i for i, line in enumerate(text) if line.startswith("fullest tile"))
    vars_at = next((i for i, line in enumerate(text) if line.startswith("variables that")), len(text))
    md = [line for line in md_block if line]
    md_tile = next(i for i, line in enumerate(md) if line.startswith("- fullest tile"))
    md_vars = next((i for i, line in enumerate(md) if line.startswith("- variables that")), len(md))
    return [
        ("total", text[1], md[0]),
        ("parts", "\n".join(text[3:tile_at]), "\n".join(md[1:md_tile])),
        ("fullest tile", "\n".join(text[tile_at:vars_at]), "\n".join(md[md_tile:md_vars])),
        ("variables", "\n".join(text[vars_at + 1 :]), "\n".join(md[md_vars:])),
    ]


def _agree(result) -> None:
    """Every figure of the Markdown's "What changed in memory" is the text's: the bytes (exact in Markdown, to
    4 significant figures in the text), the shares, the tiles and IPUs, section by section."""
    from popprof.report.diff_blocks import markdown_memory_changed, render_memory_changed

    text_block, md_block = render_memory_changed(result, width=80), markdown_memory_changed(result)
    for name, text, md in _sections(text_block, md_block):
        assert _TEXT_BYTES.findall(text) == _md_bytes(md), name
        assert _TILES.findall(text) == _TILES.findall(md), name
        # the text's fullest-tile table gives each part's share of the tile's change; Markdown its bytes only
        shares = _SHARES.findall(text.splitlines()[0] if name == "fullest tile" else text)
        assert shares == _SHARES.findall(md), name
        if name in ("total", "parts"):
            assert _TEXT_BYTES.findall(text) and shares, name  # the sections hold figures to compare


def test_markdown_and_text_agree_on_every_figure(ipu, moved, tmp_path) -> None:
    _agree(ipu)
    _agree(popprof.diff(popprof.open(BASE), popprof.open(moved[0])))
    # a part offsetting the total's growth, on pod4_pipeline: negative shares
    variables = _table(POD, "variables")
    cut = int(variables["bytes"].max()) // 2
    per_tile = cut // len(_table(POD, "tiles"))

    def edit(tables: dict[str, pd.DataFrame]) -> None:
        t, v = tables["tiles"], tables["variables"]
        v.loc[v["bytes"].idxmax(), "bytes"] -= cut
        t["always_live_bytes"] -= per_tile
        t["bytes_excl_gaps"] -= per_tile
        t["bytes_incl_gaps"] += 2 * per_tile

    _agree(popprof.diff(popprof.open(POD), popprof.open(_variant(POD, tmp_path, "pod4_offset", edit))))
    # the other way: the new side against the base, the total shrinking
    _agree(popprof.diff(popprof.open(NEW), popprof.open(BASE)))


def test_markdown_and_text_agree_when_nothing_moved(tmp_path) -> None:
    """The one line of a change within noise: the same all-tiles bytes and the same noise floor."""
    from popprof.report.diff_blocks import markdown_memory_changed, render_memory_changed

    def edit(tables: dict[str, pd.DataFrame]) -> None:
        tables["tiles"].loc[tables["tiles"]["tile"] == 7, "bytes_incl_gaps"] += 512

    result = popprof.diff(popprof.open(BASE), popprof.open(_variant(BASE, tmp_path, "noise", edit)))
    (text,), (md,) = render_memory_changed(result, width=80), markdown_memory_changed(result)
    text_total, text_rest = re.fullmatch(
        r"What changed in memory: no material change \(all tiles ([^;]+); (.+)", text
    ).groups()
    md_total, md_rest = re.fullmatch(
        r"\*\*What changed in memory:\*\* no material change \(all tiles ([\d,]+) B \([^)]+\); (.+)", md
    ).groups()
    assert text_total == units.bytes_figures(int(md_total.replace(",", ""))) == "494.9 MiB"
    assert text_rest == md_rest == "no part moved by 1,024 B (1 KiB) or more)"


# -- the JSON's fields are documented ------------------------------------------------------------------------------


def documented_fields(heading: str) -> set[str]:
    """The field paths the table under ``heading`` (``The JSON's `memory_changed```) in docs/diff.md names."""
    docs = (FIXTURES.parent / "docs" / "diff.md").read_text()
    table = docs[docs.index(heading) :]
    table = table[: table.index("\n\n", table.index("| field |"))]
    documented = set()
    for line in table.splitlines():
        if line.startswith("| `"):
            documented |= set(re.findall(r"`([^`]+)`", line.split(" | ")[0]))
    return documented


def _paths(value, prefix: str = "") -> tuple[set[str], set[str]]:
    """Every field path of a JSON value (``parts[].part``) and those of its leaves."""
    every, leaves = set(), set()
    items = value.items() if isinstance(value, dict) else ()
    for key, child in items:
        path = f"{prefix}.{key}" if prefix else key
        every.add(path)
        if isinstance(child, list):
            every.add(path + "[]")
            if not child:
                leaves.add(path + "[]")
            for row in child:
                more, ends = _paths(row, path + "[]")
                every |= more
                leaves |= ends
        elif isinstance(child, dict):
            more, ends = _paths(child, path)
            every |= more
            leaves |= ends
        else:
            leaves.add(path)
    return every, leaves


def test_every_json_field_is_documented(ipu, moved) -> None:
    """docs/diff.md's table of ``memory_changed`` names each field the document holds and no other: the mk2
    pair, the fullest tile moved (its parts listed) and a side without per-tile memory (``reason``)."""
    documented = documented_fields("The JSON's `memory_changed`")
    every, leaves = set(), set()
    unavailable = {"available": False, "reason": "the base side is a baseline"}
    for doc in (_doc(ipu), _doc(popprof.diff(popprof.open(BASE), popprof.open(moved[0]))), unavailable):
        more, ends = _paths(doc)
        every |= more
        leaves |= ends
    empty_lists = {p for p in leaves if p.endswith("[]")}
    assert leaves - empty_lists <= documented, sorted(leaves - empty_lists - documented)
    assert documented <= every, sorted(documented - every)
