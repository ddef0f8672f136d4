"""The analyses' headline figures in the metric registry, so ``baseline``, ``diff`` and the gate track them.

Each figure is the one its analysis defines (and its rule names as ``figure=``), summed over the run; nothing
is computed here beyond that sum:

- ``collectives.skew_us`` and ``collectives.transfer_us``: the synchronisation skew and the transfer of every
  collective call, summed over calls and ranks (:func:`popprof.metrics.collectives.collective_calls`; the
  rule ``distributed.collective-skew``); None without collectives. A single rank's collectives have no
  skew measured: 0 skew, their whole time transfer.
- ``launches.launch_idle_us``, ``launches.short_launch_idle_us``, ``launches.short_gaps_us`` and
  ``launches.delay_p95_us``: the launch-bound idle (the account's, in gaps ended by launched work), its part
  before the short kernels, the gaps under 1 ms before short kernels whole (the rule ``host.launch-overhead``),
  and HTA's launch delay's 95th percentile (:func:`popprof.metrics.launches.launch_overview`); None without
  launches.
- ``pipeline.imbalance_us``: the stage imbalance of a pipelined IPU run
  (:func:`popprof.metrics.pipeline.pipeline_imbalance`; the rule ``distributed.stage-imbalance``); None
  when the run is not pipelined.

The fullest tile's bytes are ``memory.max_tile_incl_gaps_bytes`` already (the rule ``memory.fullest-tile``
names it): one figure, one name.
"""

from __future__ import annotations

from ..model.profile import Profile
from . import metric
from .collectives import collective_calls
from .launches import launch_overview
from .pipeline import pipeline_imbalance


def _calls_sum(profile: Profile, column: str) -> float | None:
    calls = collective_calls(profile)
    return None if calls.empty else float(calls[column].sum())


@metric(
    "collectives.skew_us",
    "us",
    "synchronisation skew inside the collectives: each rank's wait from its own start of a collective until "
    "the last rank started it, summed over calls and ranks (docs/collectives.md)",
    needs=("events",),
)
def collective_skew_us(profile: Profile) -> float | None:
    return _calls_sum(profile, "skew_us")


@metric(
    "collectives.transfer_us",
    "us",
    "the collectives' time with every rank present (duration minus skew), summed over calls and ranks",
    needs=("events",),
)
def collective_transfer_us(profile: Profile) -> float | None:
    return _calls_sum(profile, "transfer_us")


def _launch_figure(profile: Profile, key: str) -> float | None:
    overview = launch_overview(profile)
    return None if overview is None else overview[key]


@metric(
    "launches.launch_idle_us",
    "us",
    "launch-bound idle: of each device gap before a launched kernel, the part after its launch call "
    "started (the time account's idle_launch of those gaps, every step)",
    needs=("events",),
)
def launch_idle_us(profile: Profile) -> float | None:
    return _launch_figure(profile, "launch_idle_us")


@metric(
    "launches.short_launch_idle_us",
    "us",
    "launch-bound idle before the short kernels (HTA's: shorter on the device than their launch call)",
    needs=("events",),
)
def short_launch_idle_us(profile: Profile) -> float | None:
    return _launch_figure(profile, "short_launch_idle_us")


@metric(
    "launches.short_gaps_us",
    "us",
    "the device's idle gaps under 1 ms that end at a short kernel, whole (host not submitting + launch or "
    "dependency): what launching the short kernels as one CUDA graph or fusing them could remove",
    needs=("events",),
)
def short_gaps_us(profile: Profile) -> float | None:
    return _launch_figure(profile, "short_gaps_us")


@metric(
    "launches.delay_p95_us",
    "us",
    "95th percentile of HTA's launch delay (launch call end to kernel start) over every launch",
    needs=("events",),
)
def launch_delay_p95_us(profile: Profile) -> float | None:
    return _launch_figure(profile, "delay_p95_us")


@metric(
    "pipeline.imbalance_us",
    "us",
    "stage imbalance of a pipelined IPU run: per step the slowest stage minus the mean stage, summed",
    needs=("steps",),
)
def pipeline_imbalance_us(profile: Profile) -> float | None:
    found = pipeline_imbalance(profile)
    return None if found is None else float(found["imbalance_us"])
