"""Arrow compute kernels as the parse calls them: allocating from the C heap, without ``pyarrow.compute``.

Every Arrow function the Chrome reader's parse runs (the phase and finiteness checks of a block, the split
into complete events and flows, casts, dictionary encoding) goes through :func:`call`, which

- allocates from :data:`POOL`, glibc's heap, as Arrow's JSON reader does for the blocks: what a block
  used is free for the next block and the reader's own arrays, and
  :func:`popprof.io.heap.release_free_memory` gives it back. Arrow's default pool (mimalloc) kept about
  13 MiB more resident in the reading process at the parse's end (docs/traces.md, "Memory");
- calls the kernels through ``pyarrow.compute.call_function``, pyarrow's public entry point that takes a
  memory pool. Importing ``pyarrow.compute`` builds its wrappers for every kernel (about 20 ms); the
  private ``pyarrow._compute`` it is built on would skip that, but is no public API (issue 43).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as registry

#: the C heap (not Arrow's caching allocator), for every allocation of the parse's Arrow calls
POOL = pa.system_memory_pool()


def call(name: str, *args: object, options: object = None) -> pa.Array:
    """Arrow kernel ``name`` on ``args`` (arrays, tables or scalars), allocating from :data:`POOL`."""
    return registry.call_function(name, list(args), options, POOL)


def cast(values: pa.Array, target: pa.DataType) -> pa.Array:
    """``values`` as ``target`` (a safe cast: one that would lose data raises, as ``Array.cast``)."""
    if values.type == target:
        return values
    return call("cast", values, options=registry.CastOptions.safe(target))


def fill_null(values: pa.Array, fill: object) -> pa.Array:
    """``values`` with every null replaced by ``fill`` (made a scalar of the values' type: nothing is inferred)."""
    return values if not values.null_count else call("coalesce", values, pa.scalar(fill, type=values.type))


def keep(values: pa.Array | pa.Table, mask: pa.Array) -> pa.Array | pa.Table:
    """The rows of ``values`` where ``mask`` is true (a null in ``mask`` drops the row)."""
    return call("filter", values, mask, options=registry.FilterOptions("drop"))


def is_in(values: pa.Array, value_set: pa.Array) -> pa.Array:
    """Whether each value is one of ``value_set`` (a null is not, unless ``value_set`` holds a null)."""
    return call("is_in", values, options=registry.SetLookupOptions(value_set))


def first_index(values: pa.Array, value: object) -> int:
    """The index of the first element equal to ``value`` (of the values' type), -1 when none is."""
    return call("index", values, options=registry.IndexOptions(pa.scalar(value, type=values.type))).as_py()


def struct_field(values: pa.Array, name: str) -> pa.Array:
    """The child ``name`` of a struct array (null where the struct is)."""
    return call("struct_field", values, options=registry.StructFieldOptions(name))
