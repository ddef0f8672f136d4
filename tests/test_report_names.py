"""Issue 28: diff rows of GPU traces were 2,000 characters wide (full C++ kernel names) in text and
Markdown; tables now shorten long names, JSON keeps them whole."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from popprof.compare import diff
from popprof.report.diff import render
from popprof.report.names import fold_brackets, short_name
from popprof.testing import synth

#: A kernel name shaped like the ones in Kineto traces, padded to about 2,000 characters.
KERNEL = (
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<"
    + "at::native::BinaryFunctor<float, float, float, at::native::MulFunctor<float> >, " * 24
    + "int> >(at::TensorIteratorBase&, "
    + "at::native::ReduceOp<float, at::native::MeanOps<float, float>, unsigned int, float, 4>, " * 2
    + ")"
)


def test_short_names_fold_template_and_parameter_lists():
    assert len(KERNEL) > 1_900
    assert short_name(KERNEL, 60) == "void at::native::elementwise_kernel<...>(...)"
    assert short_name("forward", 60) == "forward"
    assert fold_brackets("bool operator<(int)") is None  # brackets that do not pair: cut instead
    cut = short_name("x" * 30 + " operator<" + "y" * 80, 60)
    assert len(cut) == 60 and cut.endswith("...")


def _events(names: list[str], durations: list[float]) -> pd.DataFrame:
    n = len(names)
    return pd.DataFrame(
        {
            "event_id": np.arange(n),
            "pid": np.full(n, 100),
            "tid": np.full(n, 7),
            "parent_id": [None] * n,
            "depth": np.zeros(n, dtype=np.int16),
            "name": names,
            "channel": ["cuda"] * n,
            "start_us": np.arange(n, dtype=float) * 1_000.0,
            "dur_us": durations,
        }
    )


@pytest.fixture(scope="module")
def result():
    base = synth.make_profile(num_steps=200, num_liveness_steps=20, seed=3)
    old, new = base.copy(), base.copy()
    names = [KERNEL, KERNEL.replace("MulFunctor", "AddFunctor"), "memcpy"]
    old.set_table("events", _events(names, [100.0, 200.0, 5.0]))
    new.set_table("events", _events(names, [180.0, 90.0, 5.0]))
    return diff(old, new)


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_diff_tables_shorten_long_names(result, fmt):
    text = render(result, fmt=fmt)
    assert "elementwise_kernel<...>(...)" in text
    assert KERNEL not in text
    assert max(len(line) for line in text.splitlines()) < 200


def test_diff_json_keeps_full_names(result):
    doc = json.loads(render(result, fmt="json"))
    assert KERNEL in json.dumps(doc)
