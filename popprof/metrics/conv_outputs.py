"""A forward convolution's output shape from its backward call, for traces without ``Concrete Inputs``.

A convolution's FLOPs need its output size, which stride, padding and dilation decide; PyTorch 1.x traces
(the 2021 ResNet-50 one) record ``Input Dims`` but no ``Concrete Inputs``, so the forward call alone has no
figure. In a training trace the autograd engine records the backward node of the same forward call with
the same ``Sequence number`` (per rank), and that node's first input is ``grad_output``, whose shape is the
forward output's. :func:`forward_outputs` joins the two; an inference trace (no backward) keeps no figure.
Only convolutions that are never transposed are joined (``cudnn_convolution``, ``miopen_convolution``,
``conv1d/2d/3d``): ``aten::convolution`` without ``Concrete Inputs`` does not say whether it is transposed.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

#: forward convolutions whose output shape the join may give (never transposed)
JOINED: frozenset[str] = frozenset(
    {"aten::cudnn_convolution", "aten::miopen_convolution", "aten::conv1d", "aten::conv2d", "aten::conv3d"}
)
_BACKWARD = "ConvolutionBackward"


def _fields(text: object) -> tuple[object, object]:
    """``(Sequence number, first Input Dims)`` of one event's argument text (None where absent)."""
    if not isinstance(text, str):
        return None, None
    try:
        args = json.loads(text)
    except ValueError:
        return None, None
    if not isinstance(args, dict):
        return None, None
    dims = args.get("Input Dims")
    first = dims[0] if isinstance(dims, list) and dims and isinstance(dims[0], list) else None
    return args.get("Sequence number"), first


def forward_outputs(events: pd.DataFrame, calls: pd.DataFrame) -> pd.Series:
    """Per row of ``calls`` (``op``: a row of ``events``; ``name``; ``concrete``), the JSON text of the
    forward output shape when the call is a :data:`JOINED` convolution without ``Concrete Inputs`` and a
    backward node with its sequence number records it; None otherwise."""
    out = pd.Series(None, index=calls.index, dtype=object)
    if "args" not in events.columns or calls.empty:
        return out
    wanted = calls["name"].isin(JOINED).to_numpy(dtype=bool, copy=True)  # categorical: a test per category
    if not wanted.any():
        return out
    wanted &= calls["concrete"].isna().to_numpy()
    if not wanted.any():
        return out
    names = events["name"].astype(str)
    backward = np.flatnonzero(names.str.contains(_BACKWARD, regex=False).to_numpy())
    if not len(backward):
        return out
    rank = events["rank"].fillna(-1).to_numpy(dtype=np.int64)
    grads: dict[tuple[int, object], list] = {}
    for row in backward:
        sequence, first = _fields(events["args"].iat[row])
        if sequence is not None and first:
            grads[(int(rank[row]), sequence)] = first
    for i in np.flatnonzero(wanted):
        op = int(calls["op"].iat[i])
        sequence, _ = _fields(events["args"].iat[op])
        shape = grads.get((int(rank[op]), sequence))
        if shape is not None:
            out.iat[i] = json.dumps(shape)
    return out
