"""Red-team corpus: canaries of every leak class, planted in every place of every input kind (Chrome
trace, text summary, bundle), each asserted absent from the redacted output; and the leak scan
catches any one of them copied back into a correct redaction (it never trusts the redactor).

Every canary below is written for this file (none is shared with other tests); each one holds
the marker ``zebrafink`` or is a unique address / token listed in :data:`PAYLOADS`.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from popprof.cli import cli as main
from popprof.model.profile import Profile
from popprof.readers import bundle as bundle_io
from popprof.redaction import redact, scan
from popprof.testing.synth import make_profile

KEY = b"red-team-key-0f1e2d3c4b5a"

#: class of leak -> a canary of that class
CANARIES: dict[str, str] = {
    "prefix_nccl": "nccl zebrafink job on rack nine",
    "prefix_nccl_kernel": "ncclKernel_AllReduce zebrafink tail",
    "prefix_memcpy": "Memcpy HtoD (zebrafink staging buffer)",
    "made_up_cuda": "cuZebrafinkLaunchKernel",
    "version_build_tag": "2.4.1+zebrafink.build7",
    "aten_with_text": "aten::mm zebrafink extra words",
    "url_encoded_path": "%2Fhome%2Fzebrafinkuser%2Fdata%2Fset.bin",
    "posix_path_spaces": "/home/Zebra Finkuser/my runs/zebrafink model.py",
    "windows_path_spaces": "C:\\Users\\Zebra Fink\\Desktop\\zebrafink run.py",
    "short_base64": base64.b64encode(b"zebrafink-tok").decode(),
    "short_hex": "9f8e7d6c5b4a3f2e1d0c",
    "email_upper": "ZEBRAFINK.OWNER@EXAMPLE-CORP.ORG",
    "ipv4": "10.213.77.141",
    "ipv6": "fd7a:115c:a1e0::53",
    "url_credentials": "https://zebrafink:pw7zebra@git.example-corp.org/ml.git",
    "env_value": "ZEBRA_TOKEN=zebrafinkenvvalue42",
    "host_dotted": "zebrafink-gw07.corp.example-corp.org",
    "host_plain": "zebrafinkbox12",
    "user_flag": "--user zebrafinkadmin",
    "free_text": "loss spiked after zebrafink reshuffle",
    "identifier": "ZebrafinkEncoder/block_9/attention",
}
#: values without the marker that must not survive either (lower-cased for the comparison)
PAYLOADS = [CANARIES[k].lower() for k in ("short_base64", "short_hex", "ipv4", "ipv6")] + [
    "10.213.77.141",
    "pw7zebra",
    "fd7a:115c",
]


def _leftovers(text: str) -> list[str]:
    """Canary material found in ``text`` (the marker in any case, or a payload)."""
    low = text.lower()
    found = [m.group(0) for m in re.finditer(r"zebra.?fink", low)]
    found += [p for p in PAYLOADS if p in low]
    found += [p for p in ("2fhome", "zebra finkuser") if p in low]
    return found


def _decoded_strings(doc: object) -> list[str]:
    out: list[str] = []
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            out.extend(map(str, item))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            out.append(item)
    return out


# -- Chrome trace ---------------------------------------------------------------------------------
def _trace(path: Path, gz: bool = False) -> Path:
    events: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": 7, "args": {"name": "zebrafink_trainer.py"}},
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": 1, "args": {"name": "ZebrafinkLoader-3"}},
        {"ph": "M", "name": "process_labels", "pid": 7, "args": {"labels": "zebrafink cluster"}},
        {"ph": "C", "name": "zebrafink_memory", "pid": 7, "ts": 1.0, "args": {"zebrafink_series": 4.0}},
        {
            "ph": "s",
            "name": "ac2g",
            "cat": "ac2g",
            "pid": 7,
            "tid": 1,
            "ts": 2.0,
            "id": 9,
            "bind_id": "zebrafinkb1",
        },
    ]
    for i, (cls, canary) in enumerate(CANARIES.items()):
        events.append(
            {"ph": "X", "cat": "cpu_op", "name": canary, "pid": 7, "tid": 1, "ts": 10.0 + i, "dur": 1.0}
        )
        events.append(
            {
                "ph": "X",
                "cat": f"zebrafink_cat_{i}",
                "name": "aten::add",
                "pid": 7,
                "tid": 1,
                "ts": 40.0 + i,
                "dur": 1.0,
                "args": {
                    "detail": canary,
                    f"zebrafink_key_{cls}": 1,
                    "nested": {"deeper": {"value": canary}, "list": [canary, "x"]},
                    "hosts": ["zebrafinkhost-a", "zebrafinkhost-b"],
                    "user": ["zebrafinkops"],
                    "kernel": canary,
                },
            }
        )
    doc = {
        "traceEvents": events,
        "zebrafink_top": {"owner": CANARIES["email_upper"]},
        "distributedInfo": {"backend": CANARIES["prefix_nccl"], "rank": 0},
        "deviceProperties": [{"id": 0, "name": "zebrafink custom accelerator"}],
        "INFO": [f"launched from {CANARIES['posix_path_spaces']} by {CANARIES['user_flag']}"],
    }
    data = json.dumps(doc, indent=1).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


@pytest.mark.parametrize("gz", [False, True])
def test_trace_canaries_gone_everywhere(tmp_path, gz):
    src = _trace(tmp_path / ("t.json.gz" if gz else "t.json"), gz)
    planted = (gzip.decompress(src.read_bytes()) if gz else src.read_bytes()).decode()
    assert len(_leftovers(planted)) > 100  # the planted material is really there
    out = tmp_path / ("r.json.gz" if gz else "r.json")
    result = CliRunner().invoke(
        main, ["redact", str(src), "-o", str(out)], env={"POPPROF_REDACT_KEY": KEY.decode()}
    )
    assert result.exit_code == 0, result.output
    raw = out.read_bytes()
    text = (gzip.decompress(raw) if gz else raw).decode()
    assert _leftovers(text) == []
    assert _leftovers("\n".join(_decoded_strings(json.loads(text)))) == []
    assert scan(out, against=src).passed


def test_trace_scan_catches_any_one_canary_copied_back(tmp_path):
    """Corrupt a correct redaction by putting one original string back: the scan fails and says where."""
    src = _trace(tmp_path / "t.json")
    out = tmp_path / "r.json"
    assert redact(src, out, key=KEY).passed
    good = json.loads(out.read_text())
    for cls in ("identifier", "free_text", "host_plain", "made_up_cuda", "prefix_memcpy"):
        bad = json.loads(json.dumps(good))
        bad["traceEvents"][5 + 2 * list(CANARIES).index(cls) + 1]["args"]["kernel"] = CANARIES[cls]
        corrupt = tmp_path / f"bad_{cls}.json"
        corrupt.write_text(json.dumps(bad))
        result = scan(corrupt, against=src)
        assert not result.passed, cls
        index = 5 + 2 * list(CANARIES).index(cls) + 1
        assert {
            "kind": result.locations[0]["kind"],
            "where": f"traceEvents[{index}].args.kernel",
        } in result.locations, (cls, result.locations)
        assert _leftovers(json.dumps(result.to_dict())) == []


def test_trace_scan_failure_message_names_path_not_value(tmp_path):
    src = _trace(tmp_path / "t.json")
    out = tmp_path / "r.json"
    assert redact(src, out, key=KEY).passed
    doc = json.loads(out.read_text())
    doc["traceEvents"][0]["args"]["name"] = "zebrafink_trainer.py"
    out.write_text(json.dumps(doc))
    result = CliRunner().invoke(main, ["scan", str(out), "--against", str(src)])
    assert result.exit_code == 1
    assert "traceEvents[0].args.name" in result.output and _leftovers(result.output) == []


# -- text summary ---------------------------------------------------------------------------------
def _summary(path: Path) -> Path:
    lines = [
        "Target:",
        "  Number of IPUs:                                     1",
        "  Tiles per IPU:                                  1,472",
    ]
    for cls, canary in CANARIES.items():
        lines.append(f"  Note {cls}:        {canary}")
        lines.append(f"  {canary}:        12 B")
    lines += [
        "",
        "Memory Usage:",
        "  Total:",
        "    Including Gaps:                       518,974,905 B",
        "      Vertex Data (62,326,278 B):",
        "        By Type:",
        "          ZebrafinkCodelet<float>                              12,326,278 B",
        "          poplin::ConvPartial1x1Out<half,float,true,false>     30,000,000 B",
        "",
        "Execution:",
        "  OnTileExecute: ZebrafinkNet/layer_3/MatMul",
        f"  DoExchange: {CANARIES['identifier']}/ExchangePre",
        "",
    ]
    path.write_text("\n".join(lines))
    return path


def test_text_summary_canaries_gone(tmp_path):
    src = _summary(tmp_path / "summary.txt")
    assert len(_leftovers(src.read_text())) > 30
    out = tmp_path / "red.txt"
    result = CliRunner().invoke(
        main, ["redact", str(src), "-o", str(out)], env={"POPPROF_REDACT_KEY": KEY.decode()}
    )
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert _leftovers(text) == []
    assert "poplin::ConvPartial1x1Out<half,float,true,false>" in text and "Number of IPUs:" in text
    assert scan(out, against=src).passed
    bad = tmp_path / "bad.txt"
    bad.write_text(text.replace("Number of IPUs:", CANARIES["host_plain"] + ":"))
    located = scan(bad, against=src)
    assert not located.passed and located.locations[0]["where"] == "bad.txt:line 2"


# -- bundle ---------------------------------------------------------------------------------------
def _bundle(path: Path) -> Path:
    base = make_profile(
        num_steps=120,
        num_programs=20,
        num_liveness_steps=30,
        num_variables=12,
        sensitive=True,
        seed=5,
        name="zebrafink_run",
    )
    tables = {}
    canaries = list(CANARIES.values())
    n = 0
    for name, frame in base.tables.items():
        frame = frame.copy()
        if name == "metadata":
            tables[name] = frame
            continue
        for column in frame.columns:
            series = frame[column]
            if len(frame) == 0:
                continue
            canary = canaries[n % len(canaries)]
            n += 1
            if isinstance(series.dtype, pd.CategoricalDtype):
                frame[column] = series.cat.add_categories([canary])
                frame.loc[frame.index[0], column] = canary
            elif pd.api.types.is_string_dtype(series.dtype) or series.dtype == object:
                frame.loc[frame.index[0], column] = canary
        tables[name] = frame
    target = tables["target"]
    target.loc[target.index[0], "poplar_version"] = CANARIES["version_build_tag"]
    target.loc[target.index[0], "target_type"] = "ZebrafinkTarget"
    profile = Profile(base.name, tables, source=base.source)
    meta = dict(base.meta)
    meta["zebrafink_meta_key"] = "value"
    meta["app"] = json.dumps(
        {
            "hosts": [CANARIES["host_plain"], CANARIES["host_dotted"]],
            "zebrafink_nested_key": {"path": CANARIES["windows_path_spaces"]},
            "cmd": CANARIES["url_encoded_path"],
            "user": ["zebrafinkops"],
        }
    )
    meta["source_files"] = json.dumps(
        [{"name": "zebrafink_profile.pop", "size_bytes": 10, "sha256": "ab" * 32}]
    )
    profile.update_metadata(meta)
    bundle_io.write(
        profile, path, sources=[{"name": "zebrafink_profile.pop", "size_bytes": 10, "sha256": "ab" * 32}]
    )
    return path


def _bundle_text(path: Path) -> str:
    parts = []
    for file in sorted(path.rglob("*")):
        if file.suffix == ".parquet":
            table = pq.read_table(file)
            parts.append(json.dumps(table.to_pylist(), default=str))
            parts.append(str(table.schema.metadata))
            parts.extend(str(f.metadata) for f in table.schema)
        elif file.is_file():
            parts.append(file.read_text("utf-8", "replace"))
        parts.append(file.name)
    return "\n".join(parts)


def test_bundle_canaries_gone_from_every_column_and_the_manifest(tmp_path):
    src = _bundle(tmp_path / "zb.popprof")
    assert len(_leftovers(_bundle_text(src))) > 20  # the planted material is really there
    out = tmp_path / "red.popprof"
    result = CliRunner().invoke(
        main, ["redact", str(src), "-o", str(out)], env={"POPPROF_REDACT_KEY": KEY.decode()}
    )
    assert result.exit_code == 0, result.output
    assert _leftovers(_bundle_text(out)) == []
    assert scan(out, against=src).passed


def test_bundle_scan_names_table_column_and_row(tmp_path):
    src = _bundle(tmp_path / "zb.popprof")
    out = tmp_path / "red.popprof"
    assert redact(src, out, key=KEY).passed
    file = out / "programs.parquet"
    frame = pq.read_table(file).to_pandas()
    frame["name"] = frame["name"].astype(str)
    planted = pq.read_table(src / "programs.parquet").column("name").to_pylist()[0]  # an original name
    assert "zebrafink" in planted.lower()
    frame.loc[3, "name"] = planted
    frame.to_parquet(file)
    result = scan(out, against=src)
    assert not result.passed
    assert any(loc["where"] == "programs.parquet:name[row 3]" for loc in result.locations), result.locations
    assert _leftovers(json.dumps(result.to_dict())) == []


# -- deep JSON held in a string -------------------------------------------------------------------
def test_json_nested_100000_levels_in_a_string_is_text(tmp_path):
    deep = "[" * 100_000 + '"zebrafink_deep"' + "]" * 100_000
    src = tmp_path / "deep.json"
    src.write_text(
        json.dumps(
            {
                "traceEvents": [
                    {
                        "ph": "X",
                        "name": "aten::add",
                        "pid": 1,
                        "tid": 1,
                        "ts": 1,
                        "dur": 1,
                        "args": {"blob": deep, "blob2": "{" + deep},
                    }
                ]
            }
        )
    )
    out = tmp_path / "deep.red.json"
    result = CliRunner().invoke(
        main, ["redact", str(src), "-o", str(out)], env={"POPPROF_REDACT_KEY": KEY.decode()}
    )
    assert result.exit_code in (0, 2), result.output
    assert "Traceback" not in result.output and "RecursionError" not in result.output
    if result.exit_code == 0:
        assert "zebrafink" not in out.read_text()


def test_redact_refusal_names_json_paths_not_values(tmp_path):
    src = _trace(tmp_path / "t.json")
    policy = tmp_path / "policy.toml"
    policy.write_text("[redact.scrub]\nemails = false\n")
    out = tmp_path / "r.json"
    result = CliRunner().invoke(
        main,
        ["redact", str(src), "-o", str(out), "--policy", str(policy)],
        env={"POPPROF_REDACT_KEY": KEY.decode()},
    )
    assert result.exit_code == 1 and not out.exists()
    assert "email" in result.output and "zebrafink_top.owner" not in result.output
    assert re.search(r"email at (traceEvents\[\d+\]\.args\.\S+|<key>\.owner)", result.output), result.output
    assert _leftovers(result.output) == []
