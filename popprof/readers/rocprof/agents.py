"""The agents of a rocprofiler-sdk file: which are GPUs, their index (``gpu:N``) and name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...model.errors import InputError

#: ``rocprofiler_agent_type_t``: 1 is a CPU, 2 a GPU
GPU_TYPE = 2


@dataclass(frozen=True)
class Gpu:
    """One GPU agent: its handle in the records, its index (``gpu:N``) and what it is."""

    handle: int
    index: int
    name: str  # the ISA name, e.g. gfx950
    product: str  # e.g. AMD Instinct MI350X

    @property
    def label(self) -> str:
        """The process name of its tracks: ``AMD Instinct MI350X (gfx950)``."""
        if self.product and self.name and self.name not in self.product:
            return f"{self.product} ({self.name})"
        return self.product or self.name or f"GPU {self.index}"


def gpus(agents: list) -> dict[int, Gpu]:
    """The GPU agents by handle. The index is the agent's ``gpu_index`` (rocprofiler-sdk's GPU ordinal), else
    its ``logical_node_type_id`` (the ordinal among agents of its type), else its place among the GPUs."""
    found = [
        a for a in agents if isinstance(a, dict) and a.get("type") == GPU_TYPE and _handle(a) is not None
    ]
    out: dict[int, Gpu] = {}
    for ordinal, agent in enumerate(found):
        index = next(
            (
                v
                for v in (agent.get("gpu_index"), agent.get("logical_node_type_id"))
                if isinstance(v, int) and not isinstance(v, bool) and v >= 0
            ),
            ordinal,
        )
        handle = _handle(agent)
        out[handle] = Gpu(handle, index, str(agent.get("name") or ""), str(agent.get("product_name") or ""))
    return out


def _handle(agent: dict) -> int | None:
    ident = agent.get("id")
    value = ident.get("handle") if isinstance(ident, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def gpu_of(path: Path, by_handle: dict[int, Gpu], handle: int, where: str) -> Gpu:
    """The GPU of an agent handle a record names; InputError when ``agents`` lists no such GPU."""
    gpu = by_handle.get(handle)
    if gpu is None:
        raise InputError(
            path,
            f"{where} runs on agent {handle}, which is not a GPU of the file's agents list",
            "the file may be damaged; write it again",
        )
    return gpu
