"""Chrome Trace Event JSON (PyTorch profiler / kineto, TensorFlow, JAX, Perfetto) into event tables.

Accepts ``.json`` and ``.json.gz`` (gzip is detected by content), either a
top-level array of events or an object with ``traceEvents``. The file is
*streamed* in blocks of whole events, parsed by Arrow (plain blocks) or orjson,
or one event at a time by ijson, as the plan says (:mod:`.plan`: ``parser=`` and
``workers=``, or chosen and recorded in the metadata), and columns are built
in numpy batches, so memory follows the number of events, not the size of the
JSON text.

- ``X`` (complete) events and ``i``/``I`` instants (duration 0) go to ``events``;
- ``B``/``E`` pairs are matched per thread (see :mod:`popprof.trace.begin_end`);
  an ``E`` with nothing open is counted (``warnings.unmatched_end``) and an
  unclosed ``B`` is kept with a missing duration (``warnings.unmatched_begin``);
- ``C`` counters go to ``counters`` (one row per series in ``args``);
- ``M`` metadata (``process_name``, ``thread_name``) names rows of ``threads``;
- other phases (flows, async, objects) are counted in ``chrome.skipped_phases``.

Nesting (``parent_id``, ``depth``) is derived per thread from time containment,
and ``device_category`` from :mod:`popprof.trace.device`. Options:
``with_args`` keeps each event's ``args`` as JSON text; ``device_map``
overrides the device-activity mapping. See ``docs/traces.md``.

The package's modules, from the bytes up: :mod:`.framing` cuts the event array into blocks of whole
events, :mod:`.arrow` parses plain blocks column by column, :mod:`.columns` and :mod:`.events` collect
what one pass reads, :mod:`.parse` runs one pass, :mod:`.plan` chooses the parser and the processes,
:mod:`.split` parses a large file on two processes, :mod:`.tables` builds the tables and :mod:`.reading` is
the reader's front (``FORMAT``, ``sniff``, ``read``).
"""

from __future__ import annotations

import importlib

__all__ = ["FORMAT", "read", "sniff"]

#: where each name of the reader's interface lives: ``read`` (and the tables, pandas) is imported when first
#: asked for, so the parse modules import without pandas (the early start of the parse worker, :mod:`.early`)
_HOMES = {"FORMAT": ".sniffing", "sniff": ".sniffing", "read": ".reading"}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name], __name__), name)
