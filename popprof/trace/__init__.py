"""Trace support shared by the trace readers: device-activity mapping, nesting, timeline export, summary.

- :mod:`popprof.trace.device`: which events are device activity, and in which category
  (compute, exchange, host_io, sync, other), through an overridable regex mapping;
- :mod:`popprof.trace.nesting`: ``parent_id`` / ``depth`` from time containment (vectorised);
- :mod:`popprof.trace.timeline`: any Profile as Chrome trace JSON (Perfetto, chrome://tracing);
- :mod:`popprof.metrics.trace_summary`: busiest threads, top names by total and self time, span;
- :mod:`popprof.testing.trace_synth`: synthetic PyTorch-profiler-like traces for fixtures and benchmarks.
"""
