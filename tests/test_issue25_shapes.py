"""Issue 25: shapes of real output that is public but not redistributable (or not found in public, licensed
repositories), written here from the documented format with the real runs' figures (facts, not copies).

- A sync-dominated run: thorbenlouw/lbm-graphcore, experiments/halo-exchange-approaches/results.txt
  (commit df670f6b, no licence): an SDK 2.x execution summary with 99.9 % sync and 0.0 % exchange.
"""

from __future__ import annotations

from pathlib import Path

import popprof
from popprof.rules import RULES

SYNC_BOUND = """Execution:

  Total cycles:                                         178,569,036 (approx 111,605.6 microseconds)
  Tile average compute cycles (including idle threads): 207,965.0 (0.1% of total)
  Tile average compute cycles (excluding idle threads): 98,504.3 (0.1% of total)
  Tile average IPU exchange cycles:                     19,309.1 (0.0% of total)
  Tile average global exchange cycles:                  0.0 (0.0% of total)
  Tile average host exchange cycles:                    0.0 (0.0% of total)
  Tile average sync cycles:                             178,341,761.9 (99.9% of total)
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_sync_bound_run_gets_sync_advice_not_exchange_advice(tmp_path):
    profile = popprof.open(_write(tmp_path, "sync.txt", SYNC_BOUND))
    (f,) = popprof.check(profile, rules=["exchange.share"]).items
    assert f.severity == "error" and f.title == "Sync-bound run"
    assert "limited by data movement" not in f.advice and f.advice != RULES["exchange.share"].advice_for(
        "ipu"
    )
    assert "imbalance" in f.advice and "host" in f.advice
    assert "sync is most of it" in f.message


def test_an_exchange_bound_run_keeps_exchange_advice(tmp_path):
    text = SYNC_BOUND.replace("19,309.1 (0.0% of total)", "150,000,000.0 (84.0% of total)").replace(
        "178,341,761.9 (99.9% of total)", "10,000,000.0 (5.6% of total)"
    )
    (f,) = popprof.check(popprof.open(_write(tmp_path, "x.txt", text)), rules=["exchange.share"]).items
    assert f.title == "Exchange-bound run" and f.advice == RULES["exchange.share"].advice_for("ipu")
