"""Arrow schemas of every store table, declared (never inferred): bundle tables from ``popprof/schema.py``,
plus the store's own ``runs``, ``metrics`` and ``ranks``.

Categorical columns are stored as plain strings (Parquet dictionary-encodes them anyway), so files never
differ by dictionary index width; times are ``timestamp[us, UTC]``.
"""

from __future__ import annotations

import pyarrow as pa

from ..model.schema import TABLES

#: pandas dtypes of ``popprof/schema.py`` -> Arrow types in the store.
ARROW_TYPES: dict[str, pa.DataType] = {
    "str": pa.string(),
    "category": pa.string(),
    "boolean": pa.bool_(),
    "bool": pa.bool_(),
    "float64": pa.float64(),
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "Int8": pa.int8(),
    "Int16": pa.int16(),
    "Int32": pa.int32(),
    "Int64": pa.int64(),
}

TIME = pa.timestamp("us", tz="UTC")

#: Columns every per-run file carries besides its own (``created`` only in the derived tables).
KEY_FIELDS = [
    pa.field("run_id", pa.string()),
    pa.field("profile", pa.string()),
    pa.field("ingest_id", pa.string()),
]

RUNS = pa.schema(
    [
        pa.field("run_id", pa.string()),
        pa.field("profile", pa.string()),
        pa.field("created", TIME),
        pa.field("commit", pa.string()),
        pa.field("branch", pa.string()),
        pa.field("ci_job", pa.string()),
        pa.field("labels", pa.string()),  # JSON object of --label k=v
        pa.field("kind", pa.string()),  # profile | baseline
        pa.field("source_format", pa.string()),
        pa.field("ipu_arch", pa.string()),
        pa.field("num_ipus", pa.int32()),
        pa.field("tiles_per_ipu", pa.int32()),
        pa.field("poplar_version", pa.string()),
        pa.field("format_version", pa.int32()),  # of the bundle (or baseline) the run came from
        pa.field("tool_version", pa.string()),
        pa.field("redacted", pa.bool_()),
        pa.field("tables", pa.string()),  # JSON list of the tables stored
        pa.field("content_sha256", pa.string()),
        pa.field("ingest_id", pa.string()),
        pa.field("ingested_at", TIME),
        pa.field("manifest", pa.string()),  # the bundle manifest (or baseline header) as JSON
    ]
)

METRICS = pa.schema(
    [
        pa.field("run_id", pa.string()),
        pa.field("profile", pa.string()),
        pa.field("created", TIME),
        pa.field("name", pa.string()),
        pa.field("value", pa.float64()),
        pa.field("unit", pa.string()),
        pa.field("better", pa.string()),
        pa.field("ingest_id", pa.string()),
    ]
)

RANKS = pa.schema(
    [
        pa.field("run_id", pa.string()),
        pa.field("profile", pa.string()),
        pa.field("created", TIME),
        pa.field("rank", pa.int64()),
        pa.field("host", pa.string()),
        pa.field("steps", pa.int64()),
        pa.field("step_us", pa.float64()),
        pa.field("step_p50_us", pa.float64()),
        pa.field("step_p90_us", pa.float64()),
        pa.field("step_p99_us", pa.float64()),
        pa.field("span_us", pa.float64()),
        pa.field("idle_us", pa.float64()),
        pa.field("idle_share", pa.float64()),
        pa.field("late_start", pa.float64()),
        pa.field("ingest_id", pa.string()),
    ]
)

DERIVED_SCHEMAS: dict[str, pa.Schema] = {"runs": RUNS, "metrics": METRICS, "ranks": RANKS}
TABLE_PREFIX = "tables/"


def table_schema(table: str) -> pa.Schema:
    """The store schema of bundle table ``table``: its declared columns (optional ones too), then the keys."""
    spec = TABLES[table]
    fields = [pa.field(c.name, ARROW_TYPES[c.dtype]) for c in spec.columns]
    return pa.schema(fields + KEY_FIELDS)


def schema_of(kind: str) -> pa.Schema:
    """The schema of a store kind: ``runs``, ``metrics``, ``ranks`` or ``tables/<table>``."""
    if kind.startswith(TABLE_PREFIX):
        return table_schema(kind[len(TABLE_PREFIX) :])
    return DERIVED_SCHEMAS[kind]


def table_kind(table: str) -> str:
    """The kind of bundle table ``table`` (``tables/<table>``)."""
    return TABLE_PREFIX + table


def kinds() -> list[str]:
    """Every kind a store may hold: the derived tables, then the bundle tables."""
    return [*DERIVED_SCHEMAS, *(table_kind(t) for t in TABLES)]


def view_name(kind: str) -> str:
    """The SQL view of a kind: its own name; a bundle table by its table name (``execution_runs`` for the
    bundle's ``runs`` table, whose name the catalogue has)."""
    if not kind.startswith(TABLE_PREFIX):
        return kind
    table = kind[len(TABLE_PREFIX) :]
    return "execution_runs" if table in DERIVED_SCHEMAS else table


def to_arrow(kind: str, frame, **constants: object) -> pa.Table:
    """``frame`` (a DataFrame) as an Arrow table of ``kind``'s schema; ``constants`` fill whole columns.

    Columns the frame lacks become nulls (optional columns), columns the schema does not know are dropped,
    categoricals become strings: the declared type decides, never the frame's.
    """
    schema = schema_of(kind)
    n = len(frame)
    arrays = []
    for field in schema:
        if field.name in constants:
            arrays.append(pa.array([constants[field.name]] * n, type=field.type))
        elif field.name in frame.columns:
            # Arrow converts (a categorical becomes a dictionary array), then casts to the declared type
            array = pa.array(frame[field.name], from_pandas=True)
            if pa.types.is_dictionary(array.type):
                array = array.dictionary_decode()
            arrays.append(array if array.type == field.type else array.cast(field.type))
        else:
            arrays.append(pa.nulls(n, type=field.type))
    return pa.Table.from_arrays(arrays, schema=schema)
