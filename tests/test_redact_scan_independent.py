"""The leak scan is independent of the redactor (issue 43 item 6): it derives what is sensitive and
checks the output with its own vocabulary and detectors, so it still works, and still catches a leak,
when the redactor's modules (allowlist, detector, grammar, decisions) cannot even be imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: A real Kineto trace (pytorch/kineto's 2021 ResNet-50 sample; fixtures/real/traces/README.md).
TRACE = ROOT / "fixtures" / "real" / "traces" / "kineto2021_resnet50_worker0.pt.trace.json.gz"
#: The redactor's own modules: the scan must need none of them.
REDACTOR = ("allowlist", "scrub", "names", "redactor", "gpu_vocabulary", "policy", "chrome", "bundle")

CHILD = r"""
import importlib, json, sys, types
from pathlib import Path

root, trace, redactor = sys.argv[1], Path(sys.argv[2]), sys.argv[3].split(",")
# the redaction package without its __init__ (which imports the redactor), and the redactor's modules
# made unimportable: importing one raises ImportError
package = types.ModuleType("popprof.redaction")
package.__path__ = [root + "/popprof/redaction"]
sys.modules["popprof.redaction"] = package
for name in redactor:
    sys.modules["popprof.redaction." + name] = None
for name in redactor:
    try:
        importlib.import_module("popprof.redaction." + name)
    except ImportError:
        pass
    else:
        raise SystemExit(f"popprof.redaction.{name} is importable")

from popprof.redaction.scan import Scanner
from popprof.redaction.sensitive import derive

sensitive = derive(trace, "chrome")
leaked = sorted(sensitive.substring_tokens())
public = Scanner(sensitive)
for name in ("aten::conv2d", "cudaLaunchKernel", "ProfilerStep#3"):
    public.check(name, "out")
copied = Scanner(sensitive)
copied.check(leaked[0], "out")  # one string of the original, copied into an output as it was
detected = Scanner(sensitive)
detected.check("written by someone@example.org", "out")
print(json.dumps({
    "tokens": len(leaked),
    "public_passed": public.result.passed,
    "copied": dict(copied.result.leaks),
    "detected": dict(detected.result.leaks),
    "loaded": sorted(m for m in sys.modules if m.startswith("popprof.redaction.") and sys.modules[m]),
}))
"""


def _run_without_the_redactor() -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT), str(TRACE), ",".join(REDACTOR)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_scan_works_and_catches_a_leak_with_the_redactor_unimportable():
    found = _run_without_the_redactor()
    assert found["tokens"] > 0  # the original's sensitive strings, derived without the redactor
    assert found["public_passed"]  # public names of the trace's ecosystem pass
    assert found["copied"]  # a string of the original copied back is a leak
    assert found["detected"] == {"email": 1}  # the scan's own detector
    loaded = {name.rsplit(".", 1)[1] for name in found["loaded"]}
    assert not loaded & set(REDACTOR), loaded
