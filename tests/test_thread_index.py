"""metrics.trace.thread_index: the run-length numbering of sorted events equals the groupby numbering."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from popprof.metrics.trace import thread_index


def _grouped(events: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    rank = events["rank"].fillna(-1).to_numpy(dtype=np.int64)
    keys = pd.DataFrame({"rank": rank, "pid": events["pid"].to_numpy(), "tid": events["tid"].to_numpy()})
    grouped = keys.groupby(["rank", "pid", "tid"], sort=True)
    return grouped.ngroup().to_numpy(dtype=np.int64), grouped.size().index.to_frame(index=False)


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("order", ["sorted", "shuffled", "runs-repeated"])
def test_same_numbers_and_keys_as_groupby(seed: int, order: str) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    events = pd.DataFrame(
        {
            "rank": pd.array(rng.choice([0, 1, 2, None], n), dtype="Int64"),
            "pid": rng.choice([-1, 0, 7, 4242, 2**40], n).astype(np.int64),
            "tid": rng.choice([0, 1, 7, 4250, 2**40 + 1], n).astype(np.int64),
        }
    )
    if order == "sorted":  # as the readers leave them: by thread
        events = events.assign(r=events["rank"].fillna(-1)).sort_values(["r", "pid", "tid"], kind="stable")
    elif order == "runs-repeated":  # sorted runs, but a thread comes back after another one
        events = events.sort_values(["pid", "tid"], kind="stable")
        events = pd.concat([events, events.iloc[: max(1, n // 3)]])
    ids, keys = thread_index(events)
    want_ids, want_keys = _grouped(events)
    assert np.array_equal(ids, want_ids)
    pd.testing.assert_frame_equal(keys, want_keys)


def test_no_rank_column_and_one_event() -> None:
    one = pd.DataFrame({"pid": np.array([3], dtype=np.int64), "tid": np.array([4], dtype=np.int64)})
    ids, keys = thread_index(one)
    assert ids.tolist() == [0] and keys.to_dict("records") == [{"rank": -1, "pid": 3, "tid": 4}]
