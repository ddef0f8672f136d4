"""Shared builders for the redaction tests: profiles, traces and summaries with planted canaries.

Every canary contains the word "canary" (any case), so a test can prove that none survived by
looking for that word in every string of the output, independently of the leak scan.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from popprof.model.profile import Profile
from popprof.testing.synth import make_profile

KEY_A = b"team-key-A-0123456789abcdef"
KEY_B = b"team-key-B-fedcba9876543210"

APP_JSON = {
    "hostname": "canary-pod64-host07",
    "user": "canary.smith",
    "email": "canary.smith@corp.example.com",
    "dataset": "/mnt/datasets/canary-wiki/shard_*.tfrecord",
    "launch": "poprun --host 10.99.88.77,10.99.88.78 python train.py --config configs/canary_large.yml",
    "repo": "https://builder:canarypass99@git.canarycorp.net/ml/bert.git",
    "api_token": "tok_canary5f3c9e1b7a2d4c6e8f0a1b3c5d7e9f11",
    "env": "MY_SECRET=hunter2canary HOME=/home/canary.smith",
    "note": "contact canary.smith@corp.example.com from fe80::1234:abcd:5678:9abc",
}


def canary_profile(seed: int = 0, name: str = "training", **overrides) -> Profile:
    """A synthetic sensitive profile with canaries planted in every identifier kind and in free text."""
    spec = {
        "num_steps": 400,
        "num_programs": 60,
        "num_liveness_steps": 120,
        "num_variables": 40,
        "sensitive": True,
        "seed": seed,
        "oom_tiles": 2,
        "name": name,
        **overrides,
    }
    base = make_profile(**spec)
    tables = base.tables
    programs = tables["programs"].copy()
    old_prog = programs.loc[1, "name"]
    programs.loc[1, "name"] = "CanaryModel/secret_block_7/MatMul"
    steps = tables["steps"].copy()
    steps["program"] = steps["program"].astype("str").replace(old_prog, "CanaryModel/secret_block_7/MatMul")
    liveness = tables["liveness"].copy()
    liveness["program"] = (
        liveness["program"].astype("str").replace(old_prog, "CanaryModel/secret_block_7/MatMul")
    )
    variables = tables["variables"].copy()
    variables.loc[0, "name"] = "canary_embeddings/word_table"
    ops = tables["operations"].copy()
    ops.loc[0, "name"] = "CanaryNet/attention/Softmax"
    ops["file"] = "/home/canary.smith/projects/canarynet/modeling.py"
    tables.update(programs=programs, steps=steps, liveness=liveness, variables=variables, operations=ops)
    tables["events"] = pd.DataFrame(
        {
            "event_id": [0, 1, 2, 3],
            "pid": [7, 7, 7, 7],
            "tid": [1, 1, 2, 2],
            "parent_id": [None, 0, None, None],
            "depth": [0, 1, 0, 0],
            "name": [
                "canary_forward_pass",
                "poplin::ConvPartial1x1Out<half,float,true,false>",
                "Engine::run",
                "CanaryLoader.fetch",
            ],
            "channel": ["CanaryApp", "Poplar", "Poplar", "Framework"],
            "start_us": [0.0, 1.0, 5.0, 9.0],
            "dur_us": [10.0, 3.0, 2.0, 1.5],
            "device_category": [None, "compute", "sync", None],
            "args": [
                json.dumps({"path": "/data/canary_set/x.bin", "host": "canaryhost.corp.internal"}),
                None,
                json.dumps({"step": 3}),
                json.dumps({"user": "canary.smith"}),
            ],
        }
    )
    tables["threads"] = pd.DataFrame(
        {
            "pid": [7, 7],
            "tid": [1, 2],
            "process_name": ["canary_trainer.py", "python3"],
            "thread_name": ["CanaryWorker-0", "MainThread"],
        }
    )
    tables["counters"] = pd.DataFrame(
        {
            "pid": [7, 7],
            "name": ["canary_mem", "canary_mem"],
            "series": ["canary_series", "canary_series"],
            "ts_us": [0.0, 1.0],
            "value": [1.0, 2.0],
        }
    )
    profile = Profile(base.name, tables, source=base.source)
    meta = base.meta
    meta["app"] = json.dumps(APP_JSON)
    meta["engine_options"] = json.dumps(
        {"autoReport.all": "true", "autoReport.directory": "/home/canary.smith/runs/canary-7/reports"}
    )
    meta["source_files"] = json.dumps(
        [{"name": "canary_run_profile.pop", "size_bytes": 1234, "sha256": "ab" * 32}]
    )
    profile.update_metadata(meta)
    return profile


def bundle_strings(path: Path) -> list[str]:
    """Every string value of every Parquet file of a bundle (read back with pyarrow), plus the manifest."""
    out: list[str] = []
    for file in sorted(path.iterdir()):
        if file.suffix == ".parquet":
            table = pq.read_table(file)
            for name in table.column_names:
                out.append(name)
                for value in table.column(name).to_pylist():
                    if isinstance(value, str):
                        out.append(value)
            for k, v in (table.schema.metadata or {}).items():
                out += [k.decode(), v.decode()]
        else:
            out.append(file.read_text("utf-8"))
    return out


def chrome_trace(path: Path, events: int = 300, gz: bool = False) -> Path:
    """A small realistic Chrome trace (PyTorch-profiler-like) with canaries in every place."""
    evs: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": 4242, "args": {"name": "canary_train.py"}},
        {"ph": "M", "name": "thread_name", "pid": 4242, "tid": 1, "args": {"name": "CanaryMainThread"}},
        {"ph": "M", "name": "thread_name", "pid": 4242, "tid": 2, "args": {"name": "MainThread"}},
    ]
    names = [
        "aten::linear",
        "cudaLaunchKernel",
        "CanaryBlock.forward",
        "poplin::ConvPartial1x1Out<half>",
        "canary_loss_fn",
        "Engine::run",
    ]
    for i in range(events):
        ev = {
            "ph": "X",
            "cat": "cpu_op" if i % 3 else "CanaryCategory",
            "name": names[i % len(names)],
            "pid": 4242,
            "tid": 1 + i % 2,
            "ts": 1000.0 + i * 10.5,
            "dur": 5.25,
        }
        if i % 5 == 0:
            ev["args"] = {
                "file": "/home/canary.smith/src/canary_model.py",
                "host": "canary-node3.corp.internal",
                "Input Dims": [[8, 128]],
                "note": "loaded from 10.99.88.77 by canary.smith",
                "quoted": 'say "hello" from /home/canary.smith/x.txt',
            }
        evs.append(ev)
    evs.append({"ph": "C", "name": "canary_counter", "pid": 4242, "ts": 1000.0, "args": {"allocated": 12.5}})
    evs.append({"ph": "i", "name": "CanaryMarker", "pid": 4242, "tid": 1, "ts": 1200.0, "s": "t"})
    doc = {
        "traceEvents": evs,
        "displayTimeUnit": "ms",
        "otherData": {
            "hostname": "canary-pod64-host07",
            "cwd": "/home/canary.smith/work",
            "token": "ghp_canaryAbCdEf0123456789XyZ012345678",
        },
    }
    text = (
        '{"traceEvents":[\n'
        + ",\n".join(json.dumps(e) for e in evs)
        + "\n],\n"
        + json.dumps({k: v for k, v in doc.items() if k != "traceEvents"})[1:]
    )
    data = text.encode("utf-8")
    if gz:
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    return path


TEXT_SUMMARY = """Target:
  Number of IPUs:                                     1
  Tiles per IPU:                                  1,472
  Total Tiles:                                    1,472
  Memory Per-Tile:                             624.0 kB
  Total Memory:                                897.0 MB
  Clock Speed (approx):                     1,330.0 MHz
  Host:                  canary-pod64-host07.corp.internal
  Command:               python /home/canary.smith/train.py --user canary.smith

Memory Usage:
  Total:
    Including Gaps:                       518,974,905 B
    Excluding Gaps:
      By Memory Region:
        Non-interleaved:                  498,267,007 B
        Interleaved:                                0 B
        Overflowed:                                 0 B
      Total:                              498,267,007 B
      By Data Type:
          Variables:                      323,678,218 B
          Vertex Code:                     39,057,143 B
      Vertex Data (62,326,278 B):
        By Category:
          Internal vertex state:           21,416,720 B
        By Type:
          poplin::ConvPartial1x1Out<half,float,true,false>     30,000,000 B
          CanaryCustomCodelet<float>                           12,326,278 B
          popops::ScaledAddSupervisor<half,half,half,true>     20,000,000 B
  By Tile (Excluding Gaps):
    Range (KB)      Histogram (Excluding Gaps)               Count (tiles)
       250 -    300 ****************                                   292
       300 -    350 ****************************************         1,180
    Maximum (Including Gaps): 608,942 (594.7 K) on tile 289
    Maximum (Excluding Gaps): 591,576 (577.7 K) on tile 289
    0 tile(s) out of memory

Execution:
  OnTileExecute: CanaryNet/layer_3/MatMul
  DoExchange: CanaryNet/layer_3/MatMul/ExchangePre
  Sync: sync_canary
"""
