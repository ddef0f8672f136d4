"""Issue 44 on Poplar text: every documented out-of-memory form (item 4) and redaction of real summaries with
user vertex types and a "main, main." program list (item 6).

Sources. The out-of-memory forms are the ones Graphcore's guide prints ("Memory and Performance Optimisation
on the IPU", section 6.1 "Identifying when you've run out of IPU memory",
docs.graphcore.ai/projects/memory-performance-optimisation/en/latest/debug-out-of-memory-exception.html):
each test line below is one of its example messages, facts of the format, written here with the guide's own
figures and names; the rest of the log is a real run log (fixtures/real/poplar/devito_wave3d_oom_log2_mk2.txt,
MIT). The summary of item 6 is real and public (corwinjoy/xpu-benchmark, euro/ipu/vertex_ipu_pi.out, commit
0ae7f229) but carries no licence, so it is not copied: the test writes its shape from the facts the README of
fixtures/real/poplar lists (a "Vertex Code" block "By Type" whose names end in "(c++)" or "(asm)", user vertex
types beside Poplar's, "Programs executed:", a blank line, "main, main."), with figures and names of its own.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import popprof
from popprof.readers import detect, oom_log

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "poplar"
#: the popprof the subprocesses run: the one this test imports
PACKAGE_ROOT = str(Path(popprof.__file__).resolve().parents[1])
SHARED = Path(__file__).resolve().parents[2] / "shared" / "real" / "poplar"
#: the guide's examples (section 6.1), each with the prefix it prints or a framework's
GUIDE_EXCHANGE = (
    "Tile 0 receives more data than it has total memory in exchange "
    "'cs19_98/scatterAdd/multiUpdateAdd_ExchangePre'"
)
GUIDE_CODE = (
    "tile 0 _poplar_start must be 0 not 638976 bytes from the start of memory. Typically this error occurs when "
    "there is too much code to fit incode memory."
)
GUIDE_TILE = (
    "Memory allocation error : Out of memory on tile 0: 876476 bytes used but tiles only have 638976 bytes "
    "of memory"
)


def _four_failures(tmp_path: Path) -> Path:
    """A real run log (one failure) followed by the guide's three other messages, one of them behind a
    framework's prefix, and a Linux OOM-killer line (a memory error that is not Poplar's)."""
    log = tmp_path / "four.log"
    log.write_text(
        (REAL / "devito_wave3d_oom_log2_mk2.txt").read_text()
        + "\n".join(
            [
                GUIDE_TILE,
                GUIDE_EXCHANGE,
                f"poptorch.Error: {GUIDE_CODE}",
                "Out of memory: Killed process 4242",
            ]
        )
        + "\n"
    )
    return log


def test_every_documented_out_of_memory_form_is_a_failure(tmp_path):
    profile = popprof.open(_four_failures(tmp_path))
    oom = profile.out_of_memory
    assert oom["compilation"].tolist() == [0, 1, 2, 3]
    assert oom["tile"].tolist() == [1465, 0, 0, 0]
    assert oom["bytes_used"].tolist()[:2] == [732_960, 876_476]
    assert oom["bytes_used"].iloc[2:].isna().all()  # the other forms print no bytes used
    assert oom.loc[2, "reason"] == GUIDE_EXCHANGE
    assert oom.loc[3, "reason"] == "tile 0 _poplar_start must be 0 not 638976 bytes from the start of memory"
    doc = popprof.summary(profile)
    assert doc["memory"]["failed_compilations"] == 4
    finding = [f for f in popprof.check(profile) if f.rule_id == "memory.tile-oom"][0]
    assert "receives more data" in finding.message and "_poplar_start" in finding.message


@pytest.mark.parametrize("line", [GUIDE_EXCHANGE, GUIDE_CODE, f"RuntimeError: {GUIDE_EXCHANGE}"])
def test_each_other_form_alone_is_an_out_of_memory_log(tmp_path, line):
    log = tmp_path / "one.log"
    log.write_text(f"compiling the model\n{line}\n")
    assert detect(log) is oom_log
    oom = popprof.open(log).out_of_memory
    assert len(oom) == 1 and oom["tile"].tolist() == [0]


def test_a_memory_error_in_no_known_form_is_reported_not_dropped(tmp_path):
    log = _four_failures(tmp_path)
    profile = popprof.open(log)
    assert int(profile.meta["warnings.unparsed_memory_errors"]) == 1
    (listed,) = json.loads(profile.meta["oom_log.unparsed"])
    assert listed.endswith("Out of memory: Killed process 4242")
    run = subprocess.run(
        [sys.executable, "-m", "popprof", "summary", str(log)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": PACKAGE_ROOT},
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "1 line looks like an out-of-memory error" in run.stderr
    assert "failed compilations    4" in run.stdout


def test_the_real_logs_hold_no_unparsed_memory_error():
    for name in (
        "devito_wave3d_oom_log_mk2.txt",
        "devito_wave3d_oom_log2_mk2.txt",
        "tutorials_tut4_oom_message_mk2.txt",
    ):
        assert "warnings.unparsed_memory_errors" not in popprof.open(REAL / name).meta


def _cli(*args: str, key: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "popprof", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": PACKAGE_ROOT, "POPPROF_REDACT_KEY": key},
        check=False,
    )


def _redacts_and_scans(src: Path, out: Path) -> None:
    key = secrets.token_hex(32)
    red = _cli("redact", str(src), "-o", str(out), key=key)
    assert red.returncode == 0, f"{src.name}: {red.stderr}"
    scan = _cli("scan", str(out), "--against", str(src), key=key)
    assert scan.returncode == 0, f"{src.name}: {scan.stdout}{scan.stderr}"


REAL_TEXTS = sorted(p for p in REAL.glob("*.txt") if not p.name.startswith("LICENSE"))
SHARED_TEXTS = sorted(p for p in SHARED.glob("*.txt")) if SHARED.is_dir() else []


@pytest.mark.parametrize(
    "src", REAL_TEXTS + SHARED_TEXTS, ids=lambda p: f"{p.parent.parent.parent.name}/{p.name}"
)
def test_every_real_poplar_text_redacts_and_passes_its_own_scan(tmp_path, src):
    _redacts_and_scans(src, tmp_path / src.name)


#: the shape of the real Mk2 summary (see the module docstring): names and figures are this test's own
USER_VERTEX_SUMMARY = """\
Memory Usage:
  Total for all IPUs:
    Including Gaps:         12,000,000 B
    Excluding Gaps:
      By Memory Region:
        Non-interleaved:     1,000,000 B
        Interleaved:                 0 B
        Overflowed:                  0 B
      Total:                 1,000,000 B
      Vertex Data (20,000 B):
        By Type:
          poplar_rt::ShortMemcpy                           8 B
          QzvWalkVertex                               19,000 B
          QzvSumVertex                                    12 B
      Vertex Code (300,000 B):
        By Type:
          QzvWalkVertex (c++)                            250,000 B
          poplar_rt::ShortMemcpy (asm)                         688 B
          QzvSumVertex (c++)                                    92 B

Execution:

Programs executed:

main, main.

  Total cycles:                                         4,000,000 (approx 2,162.2 microseconds)
  Tile average compute cycles (including idle threads): 3,000,000.0 (75.0% of total)
  Tile average IPU exchange cycles:                     1,000.0 (0.0% of total)
  Tile average global exchange cycles:                  0.0 (0.0% of total)
  Tile average host exchange cycles:                    5.0 (0.0% of total)
  Tile average sync cycles:                             999,000.0 (25.0% of total)
"""


def test_a_summary_with_user_vertex_types_and_main_main_redacts(tmp_path):
    """The redactor keeps Poplar's own names ("poplar_rt::ShortMemcpy (asm)", "main, main.") and replaces the
    user's: its own scan must not call what it kept a leak (it did: exit 1, nothing written)."""
    src = tmp_path / "summary.txt"
    src.write_text(USER_VERTEX_SUMMARY)
    out = tmp_path / "red.txt"
    _redacts_and_scans(src, out)
    text = out.read_text()
    assert "main, main." in text and "poplar_rt::ShortMemcpy (asm)" in text and "Qzv" not in text
    assert (
        popprof.open(out).execution_totals["cycles"].tolist()
        == popprof.open(src).execution_totals["cycles"].tolist()
    )


def test_a_redacted_log_keeps_every_documented_failure_readable(tmp_path):
    src = _four_failures(tmp_path)
    out = tmp_path / "red.log"
    _redacts_and_scans(src, out)
    text = out.read_text()
    assert "cs19_98" not in text and "receives more data than it has total memory in exchange 'prog_" in text
    assert len(popprof.open(out).out_of_memory) == 4


IPU_MODEL = REAL / "tutorials_tut6_execution_ipumodel_sdk3.txt"
HARDWARE = REAL / "tutorials_tut6_execution_hw_sdk3.txt"


def test_diff_never_invents_a_change_from_a_line_one_summary_does_not_print():
    """The same program on the IPU Model and on hardware (graphcore/tutorials tut6): only the IPU Model prints
    "Tile average compute cycles (excluding idle threads): 3,717.6": on hardware that figure is not in the
    source, never 0, never "removed better"."""
    result = popprof.diff(IPU_MODEL, HARDWARE)
    rows = result.metrics.set_index("name")
    for name in (
        "execution.summary_cycles.tile_average.compute_excluding_idle",
        "execution.summary_share.compute_excluding_idle",
    ):
        row = rows.loc[name]
        assert row["status"] == "missing_new"
        assert row["base"] > 0 and row["new"] != row["new"]  # NaN: not in the hardware summary
        assert row["worse"] is pd.NA or pd.isna(row["worse"])
    assert rows.loc["execution.summary_cycles.tile_average.sync", "status"] == "changed"


def test_diff_prints_shares_as_summary_and_check_do():
    run = _cli("diff", str(IPU_MODEL), str(HARDWARE), "--no-gate", key=secrets.token_hex(32))
    text = run.stdout
    assert "not in new" in text and "removed" not in text
    lines = text.splitlines()
    (at,) = [i for i, line in enumerate(lines) if line.strip().startswith("execution.summary_share.sync")]
    sync = " ".join(lines[at : at + 2])  # at 80 columns a long name has its figures on the next line
    assert "0.5 %" in sync and "+0.52 pp" in sync  # as the hardware summary prints it: 0.5% of total
    assert "0.0053" not in text
    # sections neither summary holds: one line, not a paragraph each
    assert text.count("unavailable") == 0 and "not in either profile: tiles" in text
    summary = _cli("summary", str(HARDWARE), key=secrets.token_hex(32)).stdout
    assert "0.5 %" in summary


def test_a_summary_holding_a_memory_error_in_no_known_form_warns(tmp_path):
    """Beside a summary (the real tut6 hardware summary), out-of-memory messages are read too; a line that looks
    like a memory error but is in no form popprof reads is said, not dropped."""
    src = tmp_path / "run.log"
    src.write_text(HARDWARE.read_text() + f"{GUIDE_EXCHANGE}\nOut of memory: Killed process 4242\n")
    with pytest.warns(UserWarning, match="1 line looks like an out-of-memory error"):
        profile = popprof.open(src)
    assert profile.out_of_memory["reason"].tolist() == [GUIDE_EXCHANGE]
