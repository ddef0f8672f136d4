"""Traces keep their public metadata (device properties, versions, public args keys and names); planted
secrets inside public-looking keys and names are replaced."""

from __future__ import annotations

import json

from popprof.redaction import redact

KEY = b"trace-metadata-test-key-0123456789"


def _trace() -> dict:
    """A trace laid out as PyTorch 1.9's profiler wrote them in 2021 (Kineto keys of that time)."""
    return {
        "schemaVersion": 1,
        "deviceProperties": [
            {
                "id": 0,
                "name": "Tesla V100-SXM2-16GB",
                "totalGlobalMem": 16945512448,
                "computeMajor": 7,
                "computeMinor": 0,
                "maxThreadsPerBlock": 1024,
                "numSms": 80,
            }
        ],
        "computeProperties": [{"id": 0, "name": "Tesla V100-SXM2-16GB"}],
        "cupti_version": "14",
        "cuda_runtime_version": "11010",
        "cuda_driver_version": "11020",
        "traceEvents": [
            {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 5},
            {"ph": "X", "cat": "Operator", "name": "MmBackward", "pid": 1, "tid": 1, "ts": 7, "dur": 5},
            {
                "ph": "X",
                "cat": "Operator",
                "name": "aten::QzvSecretModelName",
                "pid": 1,
                "tid": 1,
                "ts": 13,
                "dur": 1,
            },
            {
                "ph": "X",
                "cat": "Kernel",
                "name": "gemmSN_TN_kernel",
                "pid": 0,
                "tid": 7,
                "ts": 3,
                "dur": 2,
                "args": {
                    "external id": 12,
                    "theoretical occupancy %": 50.0,
                    "registers per thread": 64,
                    "QzvSecretArgKey": 1,
                },
            },
            {
                "ph": "X",
                "cat": "Kernel",
                "name": "volta_sgemm_128x64_nn",
                "pid": 0,
                "tid": 7,
                "ts": 9,
                "dur": 2,
            },
            {
                "ph": "X",
                "cat": "Kernel",
                "name": "void ncclKernel_ghp_abcdefghijklmnopqrstuvwxyz0123456789(ncclWorkElem)",
                "pid": 0,
                "tid": 7,
                "ts": 12,
                "dur": 1,
            },
        ],
    }


def test_public_metadata_stays_and_planted_secrets_go(tmp_path):
    src = tmp_path / "trace.json"
    src.write_text(json.dumps(_trace()))
    out = tmp_path / "red.json"
    report = redact(src, out, key=KEY)
    assert report.passed
    doc = json.loads(out.read_text())
    original = _trace()
    for key in ("deviceProperties", "computeProperties", "schemaVersion"):
        assert doc[key] == original[key], key
    for key in ("cupti_version", "cuda_runtime_version", "cuda_driver_version"):
        assert doc[key] == original[key], key
    names = [e["name"] for e in doc["traceEvents"]]
    assert names[:2] == ["aten::mm", "MmBackward"]
    assert names[3] == "gemmSN_TN_kernel" and names[4] == "volta_sgemm_128x64_nn"
    args = doc["traceEvents"][3]["args"]
    assert {"external id", "theoretical occupancy %", "registers per thread"} <= set(args)
    assert args["external id"] == 12 and args["theoretical occupancy %"] == 50.0
    text = out.read_text()
    assert "Qzv" not in text and "ghp_" not in text
