"""Synthetic, realistic IPU profiles for fixtures, tests, benchmarks and demos.

One :class:`SynthSpec` describes a profile (target, size, step mix, memory
pressure); :func:`make_profile` turns it into a :class:`~popprof.model.profile.Profile`
with the canonical tables, fully vectorised so 16 IPUs x 200,000 steps build in
seconds. The fixture script writes the same profile in every input form
(pva test double, text summary, SDK 1.x JSON, bundle), so every reader can be
checked against the tables this module produced.

Real target sizes come from the reference facts: Mk1 1,216 tiles x 262,144 B
at 1.6 GHz; Mk2 (and Bow) 1,472 tiles x 638,976 B at 1.33 GHz (Bow 1.85 GHz).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from ..model.profile import Profile
from ..model.schema import PROGRAM_TYPE_CATEGORY

#: arch -> (tiles per IPU, bytes per tile, clock Hz)
ARCHS: dict[str, tuple[int, int, float]] = {
    "ipu1": (1216, 262_144, 1.6e9),
    "ipu2": (1472, 638_976, 1.33e9),
    "bow": (1472, 638_976, 1.85e9),
}

#: Memory categories documented for ``tile.memory.category.<cat>.total``, with their share of the
#: non-variable part of a tile's memory.
MEMORY_CATEGORIES: dict[str, float] = {
    "vertexCode": 0.22,
    "vertexInstanceState": 0.12,
    "vectorListDescriptor": 0.04,
    "copyDescriptor": 0.05,
    "vertexFieldData": 0.14,
    "controlCode": 0.16,
    "internalExchangeCode": 0.15,
    "globalExchangeCode": 0.02,
    "hostExchangeCode": 0.03,
    "constant": 0.07,
}

#: Relative frequency of program types among executed steps (single-IPU mix; GlobalExchange added for >1 IPU).
STEP_MIX: dict[str, float] = {
    "OnTileExecute": 0.46,
    "DoExchange": 0.26,
    "Sync": 0.14,
    "StreamCopyBegin": 0.02,
    "StreamCopyMid": 0.03,
    "StreamCopyEnd": 0.02,
    "GlobalExchange": 0.05,
    "OnEveryTileSwitch": 0.02,
}

#: Median cycles of one step by program type.
TYPE_CYCLES: dict[str, float] = {
    "OnTileExecute": 18_000,
    "DoExchange": 4_500,
    "Sync": 600,
    "StreamCopyBegin": 2_000,
    "StreamCopyMid": 25_000,
    "StreamCopyEnd": 1_500,
    "GlobalExchange": 12_000,
    "OnEveryTileSwitch": 900,
}

LAYERS = (
    "embeddings",
    "encoder/layer_{i}/attention/self",
    "encoder/layer_{i}/attention/output",
    "encoder/layer_{i}/intermediate",
    "encoder/layer_{i}/output",
    "pooler",
    "loss",
    "optimizer/adam",
)
OPS = (
    "MatMul",
    "Softmax",
    "Add",
    "LayerNorm",
    "Gelu",
    "Dropout",
    "Reshape",
    "Transpose",
    "ReduceSum",
    "Conv2D",
    "BiasAdd",
    "Mul",
)
VERTEX_TYPES = (
    "poplin::ConvPartial1x1Out<half,float,true,false>",
    "popops::ScaledAddSupervisor<half,half,half,true>",
    "poplin::ReduceAdd<float,half>",
    "popops::BroadcastScalar1DSupervisor<half>",
    "popnn::NonLinearitySupervisor<half,gelu>",
    "popops::Reduce<popops::ReduceAdd,float,half>",
)


@dataclass
class SynthSpec:
    """What to generate. Defaults give a small single-IPU Mk2 training profile."""

    name: str = "training"
    arch: str = "ipu2"
    num_ipus: int = 1  # every IPU of the target (all replicas)
    num_replicas: int = 1  # replicas of the graph; each spans num_ipus // num_replicas IPUs
    num_runs: int = 2
    num_steps: int = 2_000  # execution steps over all runs
    num_programs: int = 400
    num_liveness_steps: int = 600
    num_variables: int = 300  # always-live variables
    median_fill: float = 0.55  # median tile memory (excl. gaps) / capacity
    hot_tiles: int = 6  # tiles at 88-97 % of capacity
    oom_tiles: int = 0  # tiles over capacity
    gap_share: float = 0.04  # gaps / memory including gaps
    execution: bool = True  # include runs and steps
    debug: bool = True  # include operations (debug.cbor)
    exchange_heavy: tuple[float, float] | None = (0.55, 0.65)  # fraction of steps where exchange dominates
    host_stall: tuple[float, float] | None = None  # fraction of steps where stream copies dominate
    seed: int = 0
    sensitive: bool = True  # plant realistic sensitive metadata (paths, hosts) for redaction
    poplar_version: str = "3.3.0 (de1f8de2a7)"
    extra: dict = field(default_factory=dict)

    @property
    def tiles_per_ipu(self) -> int:
        return ARCHS[self.arch][0]

    @property
    def bytes_per_tile(self) -> int:
        return ARCHS[self.arch][1]

    @property
    def clock_hz(self) -> float:
        return ARCHS[self.arch][2]

    @property
    def num_tiles(self) -> int:
        return self.tiles_per_ipu * self.num_ipus


def make_profile(spec: SynthSpec | None = None, **overrides: object) -> Profile:
    """Build a realistic Profile from ``spec`` (fields can be overridden by keyword)."""
    spec = spec or SynthSpec()
    if overrides:
        spec = SynthSpec(**{**asdict(spec), **overrides})
    if spec.arch not in ARCHS:
        raise ValueError(f"unknown arch {spec.arch!r}; known: {', '.join(ARCHS)}")
    if spec.num_replicas < 1 or spec.num_ipus % spec.num_replicas:
        raise ValueError(
            f"num_ipus ({spec.num_ipus}) must be a multiple of num_replicas ({spec.num_replicas})"
        )
    rng = np.random.default_rng(spec.seed)
    tables: dict[str, pd.DataFrame] = {"target": _target(spec)}
    tiles, tile_memory = _tiles(spec, rng)
    tables["tiles"], tables["tile_memory"] = tiles, tile_memory
    programs = _programs(spec, rng)
    tables["programs"] = programs
    variables = _variables(spec, rng, tiles)
    tables["variables"] = variables
    tables["liveness"], tables["liveness_variables"] = _liveness(spec, rng, programs, tiles)
    if spec.execution:
        tables["steps"] = _steps(spec, rng, programs)
        tables["runs"] = _runs(spec, tables["steps"])
    if spec.debug:
        tables["operations"] = _operations(spec, rng)
    profile = Profile(spec.name, tables, source=f"synth:{spec.name}")
    profile.update_metadata(_metadata(spec))
    return profile


def _target(spec: SynthSpec) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "source_format": "synth",
                "ipu_arch": spec.arch,
                "target_type": "Ipu",
                "num_ipus": spec.num_ipus,
                "tiles_per_ipu": spec.tiles_per_ipu,
                "num_tiles": spec.num_tiles,
                "bytes_per_tile": spec.bytes_per_tile,
                "clock_hz": spec.clock_hz,
                "num_replicas": spec.num_replicas,
                "ipus_per_replica": spec.num_ipus // spec.num_replicas,
                "poplar_version": spec.poplar_version,
            }
        ]
    )


def _tiles(spec: SynthSpec, rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    n, cap = spec.num_tiles, spec.bytes_per_tile
    tile = np.arange(n, dtype=np.int32)
    ipu = (tile // spec.tiles_per_ipu).astype(np.int16)
    tile_in_ipu = (tile % spec.tiles_per_ipu).astype(np.int32)
    # Smooth structure along tiles (layers mapped to tile ranges) plus noise.
    wave = 0.06 * np.sin(tile_in_ipu / spec.tiles_per_ipu * 6 * np.pi)
    fill = np.clip(spec.median_fill + wave + rng.normal(0, 0.035, n), 0.05, 0.86)
    # The first tile of each IPU carries extra control code (as real profiles often show).
    fill[tile_in_ipu == 0] = np.minimum(fill[tile_in_ipu == 0] + 0.1, 0.86)
    special = rng.choice(n, size=min(n, spec.hot_tiles + spec.oom_tiles), replace=False)
    hot, oom = special[: spec.hot_tiles], special[spec.hot_tiles :]
    fill[hot] = rng.uniform(0.88, 0.97, len(hot))
    incl = (fill * cap).astype(np.int64)
    incl[oom] = (cap * rng.uniform(1.02, 1.35, len(oom))).astype(np.int64)
    excl = (incl * (1 - spec.gap_share * rng.uniform(0.5, 1.5, n))).astype(np.int64)
    overflowed = np.where(incl > cap, excl - int(cap * 0.97), 0).clip(0)
    non_variable = (excl * rng.uniform(0.30, 0.40, n)).astype(np.int64)
    always_live = (excl * rng.uniform(0.20, 0.28, n)).astype(np.int64)
    not_always_live = excl - non_variable - always_live
    tiles = pd.DataFrame(
        {
            "tile": tile,
            "ipu": ipu,
            "tile_in_ipu": tile_in_ipu,
            "bytes_incl_gaps": incl,
            "bytes_excl_gaps": excl,
            "overflowed_bytes": overflowed,
            "always_live_bytes": always_live,
            "not_always_live_bytes": not_always_live,
            "capacity_bytes": np.full(n, cap, dtype=np.int64),
        }
    )
    cats = list(MEMORY_CATEGORIES)
    shares = np.array(list(MEMORY_CATEGORIES.values()))
    jitter = rng.uniform(0.7, 1.3, (n, len(cats))) * shares
    jitter[:, cats.index("globalExchangeCode")] *= 0 if spec.num_ipus == 1 else 1
    jitter /= jitter.sum(axis=1, keepdims=True)
    per_cat = np.floor(jitter * non_variable[:, None]).astype(np.int64)
    per_cat[:, 0] += non_variable - per_cat.sum(axis=1)  # exact sums
    tile_memory = pd.DataFrame(
        {
            "tile": np.repeat(tile, len(cats)),
            "category": pd.Categorical(np.tile(cats, n), categories=cats),
            "bytes": per_cat.ravel(),
        }
    )
    return tiles, tile_memory[tile_memory["bytes"] > 0].reset_index(drop=True)


def _program_names(spec: SynthSpec, rng: np.random.Generator, count: int) -> list[str]:
    layers = rng.integers(0, len(LAYERS), count)
    ops = rng.integers(0, len(OPS), count)
    idx = rng.integers(0, 12, count)
    return [
        f"{LAYERS[la].format(i=i)}/{OPS[o]}_{k}"
        for k, (la, o, i) in enumerate(zip(layers, ops, idx, strict=True))
    ]


def _programs(spec: SynthSpec, rng: np.random.Generator) -> pd.DataFrame:
    mix = dict(STEP_MIX)
    if spec.num_ipus == 1:
        mix.pop("GlobalExchange")
    types = list(mix) + ["Sequence", "Repeat"]
    weights = np.array(list(mix.values()) + [0.04, 0.02])
    ptype = rng.choice(types, size=spec.num_programs, p=weights / weights.sum())
    ptype[: len(mix)] = list(mix)  # every executable type appears at least once
    names = _program_names(spec, rng, spec.num_programs)
    suffix = {
        "OnTileExecute": "",
        "DoExchange": "/ExchangePre",
        "GlobalExchange": "/GlobalExchange",
        "StreamCopyBegin": "/StreamCopy",
        "StreamCopyMid": "/StreamCopy",
        "StreamCopyEnd": "/StreamCopy",
        "Sync": "/Sync",
        "OnEveryTileSwitch": "/Switch",
        "Sequence": "",
        "Repeat": "/Loop",
    }
    names = [n + suffix[t] for n, t in zip(names, ptype, strict=True)]
    category = pd.Series(ptype).map(PROGRAM_TYPE_CATEGORY).fillna("other")
    return pd.DataFrame(
        {
            "program_id": np.arange(spec.num_programs, dtype=np.int32),
            "name": names,
            "type": ptype,
            "category": category,
            "code_bytes": rng.integers(200, 200_000, spec.num_programs),
        }
    )


def _variables(spec: SynthSpec, rng: np.random.Generator, tiles: pd.DataFrame) -> pd.DataFrame:
    n = spec.num_variables
    # Tiles span every replica; the graph's variables are one replica's (liveness is per replica too).
    total = int(tiles["always_live_bytes"].sum()) // spec.num_replicas
    weights = rng.pareto(1.2, n) + 0.05
    sizes = np.floor(weights / weights.sum() * total).astype(np.int64)
    kinds = ("weights", "bias", "momentum", "gamma", "beta", "step_counter")
    names = [f"{LAYERS[k % len(LAYERS)].format(i=k % 12)}/{kinds[k % len(kinds)]}_{k}" for k in range(n)]
    return pd.DataFrame(
        {
            "name": names,
            "bytes": sizes,
            "always_live": np.ones(n, dtype=bool),
            "tile": pd.array([None] * n, dtype="Int32"),
        }
    )


def _liveness(
    spec: SynthSpec, rng: np.random.Generator, programs: pd.DataFrame, tiles: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    n = spec.num_liveness_steps
    x = np.linspace(0, 1, n)
    # Activations pile up through the forward pass, peak, then drain in the backward pass.
    curve = np.where(x < 0.62, 0.15 + 0.85 * (x / 0.62) ** 1.4, 0.15 + 0.85 * ((1 - x) / 0.38) ** 0.8)
    curve = np.clip(curve + rng.normal(0, 0.015, n), 0.02, None)
    # pva's liveness is per replica, the tiles table spans all replicas.
    peak_bytes = 0.9 * float(tiles["not_always_live_bytes"].sum()) / spec.num_replicas
    nal = (curve / curve.max() * peak_bytes).astype(np.int64)
    prog_idx = rng.integers(0, len(programs), n)
    liveness = pd.DataFrame(
        {
            "step": np.arange(n, dtype=np.int32),
            "program": programs["name"].to_numpy()[prog_idx],
            "program_type": programs["type"].to_numpy()[prog_idx],
            "not_always_live_bytes": nal,
        }
    )
    k = 3  # largest variables per step
    shares = rng.dirichlet(np.ones(k) * 2, n) * 0.5
    var_names = np.array(
        [
            f"activations/{LAYERS[(s // 40) % len(LAYERS)].format(i=(s // 40) % 12)}/out_{s}_{j}"
            for s in range(n)
            for j in range(k)
        ]
    )
    live_vars = pd.DataFrame(
        {
            "step": np.repeat(np.arange(n, dtype=np.int32), k),
            "name": var_names,
            "bytes": (shares * nal[:, None]).astype(np.int64).ravel(),
        }
    )
    return liveness, live_vars


def _step_types(spec: SynthSpec, rng: np.random.Generator, programs: pd.DataFrame) -> np.ndarray:
    """Program index per step, with exchange-heavy and host-stall phases where the spec asks for them."""
    n = spec.num_steps
    executable = programs[~programs["type"].isin(["Sequence", "Repeat"])]
    by_type = {t: g["program_id"].to_numpy() for t, g in executable.groupby("type", observed=True)}
    types = list(by_type)
    base = np.array([STEP_MIX.get(t, 0.01) for t in types])
    weights = np.tile(base / base.sum(), (n, 1))
    pos = np.arange(n) / max(n - 1, 1)

    def boost(phase: tuple[float, float] | None, favoured: set[str], factor: float) -> None:
        if phase is None:
            return
        inside = (pos >= phase[0]) & (pos <= phase[1])
        cols = [i for i, t in enumerate(types) if t in favoured]
        weights[np.ix_(inside, cols)] *= factor

    boost(spec.exchange_heavy, {"DoExchange", "GlobalExchange", "Sync"}, 6.0)
    boost(spec.host_stall, {"StreamCopyBegin", "StreamCopyMid", "StreamCopyEnd"}, 25.0)
    weights /= weights.sum(axis=1, keepdims=True)
    # Vectorised categorical draw: inverse CDF per row.
    choice = (weights.cumsum(axis=1) < rng.random(n)[:, None]).sum(axis=1).clip(0, len(types) - 1)
    program = np.empty(n, dtype=np.int64)
    for i, t in enumerate(types):  # loop over a handful of types, not over steps
        mask = choice == i
        program[mask] = rng.choice(by_type[t], mask.sum())
    return program


def _steps(spec: SynthSpec, rng: np.random.Generator, programs: pd.DataFrame) -> pd.DataFrame:
    n, ipus = spec.num_steps, spec.num_ipus
    program = _step_types(spec, rng, programs)
    ptype = programs["type"].to_numpy()[program]
    median = pd.Series(ptype).map(TYPE_CYCLES).to_numpy(dtype=np.float64)
    base_cycles = median * rng.lognormal(0, 0.5, n)
    cycles = (np.repeat(base_cycles, ipus) * rng.uniform(0.9, 1.1, n * ipus)).astype(np.int64) + 1
    rep_type = np.repeat(ptype, ipus)
    is_exchange = np.isin(rep_type, ["DoExchange", "GlobalExchange", "StreamCopyMid"])
    data = np.where(is_exchange, (cycles * rng.uniform(8, 40, n * ipus)).astype(np.int64), 0)
    balance = np.where(
        rep_type == "OnTileExecute", rng.uniform(0.55, 0.98, n * ipus), rng.uniform(0.2, 0.9, n * ipus)
    )
    runs = (np.arange(n) * spec.num_runs // n).astype(np.int32)
    active_from = (cycles * rng.uniform(0.0, 0.05, n * ipus)).astype(np.int64)
    return pd.DataFrame(
        {
            "run": np.repeat(runs, ipus),
            "step": np.repeat(np.arange(n, dtype=np.int32), ipus),
            "ipu": np.tile(np.arange(ipus, dtype=np.int16), n),
            "program": pd.Categorical.from_codes(
                np.repeat(program, ipus), categories=programs["name"].unique()
            )
            if programs["name"].is_unique
            else np.repeat(programs["name"].to_numpy()[program], ipus),
            "program_type": rep_type,
            "category": pd.Series(rep_type).map(PROGRAM_TYPE_CATEGORY).fillna("other"),
            "cycles": cycles,
            "active_from_cycles": active_from,
            "active_to_cycles": np.maximum(
                active_from, (cycles * rng.uniform(0.9, 1.0, n * ipus)).astype(np.int64)
            ),
            "tile_balance": balance.round(4),
            "data_in_bytes": data,
            "data_out_bytes": data,
        }
    )


def _runs(spec: SynthSpec, steps: pd.DataFrame) -> pd.DataFrame:
    per_run = steps.groupby(["run", "ipu"], observed=True)["cycles"].sum().groupby("run").max()
    dur_us = per_run.to_numpy(dtype=np.float64) / spec.clock_hz * 1e6
    host_gap_us = 850.0
    start = np.concatenate([[1_000.0], 1_000.0 + np.cumsum(dur_us + host_gap_us)[:-1]])
    return pd.DataFrame(
        {
            "run": per_run.index.to_numpy(dtype=np.int32),
            "name": [f"Program {r} (main)" for r in per_run.index],
            "start_us": start,
            "end_us": start + dur_us,
        }
    )


def _operations(spec: SynthSpec, rng: np.random.Generator) -> pd.DataFrame:
    n = max(20, spec.num_liveness_steps // 10)
    first = np.sort(rng.integers(0, spec.num_liveness_steps, n))
    last = np.minimum(first + rng.integers(1, 40, n), spec.num_liveness_steps - 1)
    layers = rng.choice(["popart", "poptorch", "poplibs", "onnx"], n)
    names = [f"{LAYERS[i % len(LAYERS)].format(i=i % 12)}/{OPS[i % len(OPS)]}" for i in range(n)]
    files = [
        f"/home/alice.smith/projects/bert/modeling_{i % 3}.py" if spec.sensitive else f"model_{i % 3}.py"
        for i in range(n)
    ]
    return pd.DataFrame(
        {
            "name": names,
            "layer": layers,
            "file": files,
            "line": rng.integers(10, 900, n),
            "first_step": first,
            "last_step": last,
            "bytes": rng.integers(1_000, 5_000_000, n),
        }
    )


def _metadata(spec: SynthSpec) -> dict[str, str]:
    fields = asdict(spec)
    if fields["num_replicas"] == 1:  # the default: left out so specs written before it read the same
        del fields["num_replicas"]
    meta = {"source_format": "synth", "synth.spec": json.dumps(fields, default=str)}
    options = {
        "autoReport.all": "true",
        "autoReport.directory": "./reports",
        "debug.allowOutOfMemory": "true",
        "autoReport.executionProfileProgramRunCount": "2",
    }
    if spec.sensitive:
        options["autoReport.directory"] = "/home/alice.smith/runs/bert-large-2026-11-30/reports"
        meta["app"] = json.dumps(
            {
                "hostname": "ipu-pod64-host07.corp.example.com",
                "user": "alice.smith",
                "dataset": "/mnt/datasets/internal/wikipedia-2026/shard_*.tfrecord",
                "launch": "poprun --host 10.12.4.21,10.12.4.22 python train.py --config configs/bert_large.yml",
                "api_token": "tok_5f3c9e1b7a2d4c6e8f0a1b3c5d7e9f11",
            }
        )
    meta["engine_options"] = json.dumps(options)
    return meta
