"""Arrow schemas of every store table, declared (never inferred): bundle tables from ``popprof/schema.py``,
plus the store's own ``runs``, ``metrics``, ``ranks``, ``findings`` and ``account``.

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

FINDINGS = pa.schema(
    [
        pa.field("run_id", pa.string()),
        pa.field("profile", pa.string()),
        pa.field("created", TIME),
        pa.field("position", pa.int64()),
        pa.field("rule_id", pa.string()),
        pa.field("severity", pa.string()),
        pa.field("title", pa.string()),
        pa.field("figure", pa.string()),
        pa.field("value", pa.float64()),
        pa.field("threshold", pa.float64()),
        pa.field("share", pa.float64()),
        pa.field("gain_value", pa.float64()),
        pa.field("gain_unit", pa.string()),
        pa.field("gain_device", pa.string()),
        pa.field("message", pa.string()),
        pa.field("rules_sha256", pa.string()),
        pa.field("popprof_version", pa.string()),
        pa.field("ingest_id", pa.string()),
    ]
)

#: The time account's parts (``popprof/metrics/account.py`` ``PARTS``, declared here: a test keeps them equal).
ACCOUNT_PARTS = (
    "compute",
    "communication",
    "copies",
    "idle_host",
    "idle_launch",
    "idle_other",
    "exchange",
    "global_exchange",
    "sync",
    "stream_copies",
    "other",
    "idle",
)

ACCOUNT = pa.schema(
    [
        pa.field("run_id", pa.string()),
        pa.field("profile", pa.string()),
        pa.field("created", TIME),
        pa.field("platform", pa.string()),
        pa.field("rank", pa.int64()),
        pa.field("device", pa.string()),
        pa.field("step", pa.int64()),
        pa.field("basis", pa.string()),
        pa.field("window_us", pa.float64()),
        *(pa.field(part, pa.float64()) for part in ACCOUNT_PARTS),
        pa.field("ingest_id", pa.string()),
    ]
)

DERIVED_SCHEMAS: dict[str, pa.Schema] = {
    "runs": RUNS,
    "metrics": METRICS,
    "ranks": RANKS,
    "findings": FINDINGS,
    "account": ACCOUNT,
}

#: What a row of each of the store's own tables is, and what each column means (``docs/store.md``'s schema
#: section is generated from these and the bundle schema: :func:`schema_markdown`).
DERIVED_ROWS = {
    "runs": "one ingest of a (run_id, profile): the view shows the live one (the latest ingested_at)",
    "metrics": "one metric of a run, as `popprof baseline` holds it",
    "ranks": "one rank of a trace run: the figures `popprof check`'s straggler rule uses",
    "findings": "one finding of the rules on a run, as `popprof check` gives it (`store add`'s rule settings)",
    "account": "one device of a run: its time account (`popprof query`'s `account` table), parts summing to "
    "window_us",
}
DERIVED_COLUMNS = {
    "run_id": "the run's id (a string: `00123` stays `00123`)",
    "profile": "the profile name: the series key (`store add --profile`)",
    "ingest_id": "which add wrote the row (16 hex digits of the run id, profile and content hash)",
    "created": "the run's own time (`--time`, else the bundle's, else the source's modification time)",
    "commit": "the commit of the code that made the run (`--commit`, else from CI)",
    "branch": "its branch (`--branch`, else from CI)",
    "ci_job": "the CI job's name",
    "labels": "JSON object of the `--label k=v` given",
    "kind": "`profile`, or `baseline` for a run added from a baseline JSON",
    "source_format": "the format the run was read from",
    "ipu_arch": "the IPU architecture (IPU runs)",
    "num_ipus": "IPUs of the target",
    "tiles_per_ipu": "tiles per IPU of the target",
    "poplar_version": "the Poplar SDK version the profile names",
    "format_version": "the bundle (or baseline) format version the run came from",
    "tool_version": "the popprof version that wrote the source",
    "redacted": "whether the source was redacted",
    "tables": "JSON list of the bundle tables stored",
    "content_sha256": "the content hash: tables, metrics and the identity given (not the run id)",
    "ingested_at": "when the add wrote the row",
    "manifest": "the bundle manifest (or baseline header) as JSON; its `judged`: the run's `rules_sha256`, "
    '`popprof_version`, rows of `findings` and `account` and its `limit` (`{"limit", "share"}`, '
    "`docs/figures.md`) (none: added before they were kept)",
    "name": "the metric's name (`docs/diff.md`)",
    "value": "its value",
    "unit": "its unit",
    "better": "`lower`, `higher` or empty (neutral): which way is an improvement",
    "rank": "the rank",
    "host": "the trace's host (`<hostname>_<pid>` worker), else `--label host=...`, else empty",
    "steps": "ProfilerSteps of the rank",
    "step_us": "median ProfilerStep time",
    "step_p50_us": "50th percentile ProfilerStep time",
    "step_p90_us": "90th percentile ProfilerStep time",
    "step_p99_us": "99th percentile ProfilerStep time",
    "span_us": "the rank's span",
    "idle_us": "device idle time of the rank",
    "idle_share": "idle time over the rank's window",
    "late_start": "how late the rank starts the last long collective, in mean iterations (HTA's figure)",
}
#: Columns whose meaning in a kind differs from :data:`DERIVED_COLUMNS`, or that only that kind has.
KIND_COLUMNS: dict[str, dict[str, str]] = {
    "findings": {
        "position": "the finding's place in `popprof check`'s order (1 = the largest estimated gain)",
        "rule_id": "the rule's id (`popprof rules`)",
        "severity": "`info`, `warning` or `error`",
        "title": "the rule's title",
        "figure": "the figure the finding rests on (a metric or time-account part)",
        "value": "the value the rule judged",
        "threshold": "the threshold it was judged against",
        "share": "the figure's share of its whole (the run's window, the memory), as a fraction",
        "gain_value": "the estimated gain",
        "gain_unit": "its unit",
        "gain_device": "the device the gain is on (`gpu:0`), else empty",
        "message": "the finding's message",
        "rules_sha256": "16 hex digits of the SHA-256 of the rule settings that judged the run (rules enabled, "
        "parameters resolved): equal for runs judged alike",
        "popprof_version": "the popprof version whose rules judged the run",
    },
    "account": {
        "platform": "`gpu` or `ipu`",
        "rank": "the device's rank, empty when the trace names none",
        "device": "the device (`gpu:0`, `ipu:0`)",
        "step": "empty: the run's rows (the whole window)",
        "basis": "the window: `device_span`, `ipu_run` or `summary_total` (`docs/figures.md`)",
        "window_us": "the window's length; the parts sum to it",
        "compute": "running compute (GPU, IPU)",
        "communication": "running exposed communication and no compute (GPU)",
        "copies": "copying or setting memory and nothing above (GPU)",
        "idle_host": "idle, the next work not yet submitted by the host (GPU)",
        "idle_launch": "idle, the next work already submitted: launch latency or a dependency (GPU)",
        "idle_other": "idle, what came next not known (GPU)",
        "exchange": "exchange (IPU)",
        "global_exchange": "global exchange (IPU)",
        "sync": "sync (IPU)",
        "stream_copies": "stream copies: host I/O (IPU)",
        "other": "other work (IPU)",
        "idle": "idle (IPU)",
    },
}
KEY_COLUMNS = {
    "run_id": "the run's id",
    "profile": "the profile name",
    "ingest_id": "which add wrote the row",
}
TABLE_PREFIX = "tables/"


def table_schema(table: str) -> pa.Schema:
    """The store schema of bundle table ``table``: its declared columns (optional ones too), then the keys."""
    spec = TABLES[table]
    fields = [pa.field(c.name, ARROW_TYPES[c.dtype]) for c in spec.columns]
    return pa.schema(fields + KEY_FIELDS)


def schema_of(kind: str) -> pa.Schema:
    """The schema of a store kind: ``runs``, ``metrics``, ``ranks``, ``findings``, ``account`` or
    ``tables/<table>``."""
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


#: Arrow types -> DuckDB SQL types for the explicit casts.
_DUCKDB_TYPES = {
    pa.string(): "VARCHAR",
    pa.bool_(): "BOOLEAN",
    pa.int8(): "TINYINT",
    pa.int16(): "SMALLINT",
    pa.int32(): "INTEGER",
    pa.int64(): "BIGINT",
    pa.float64(): "DOUBLE",
}


def duckdb_type(arrow_type: pa.DataType) -> str:
    """The DuckDB type of a store column."""
    if pa.types.is_timestamp(arrow_type):
        return "TIMESTAMPTZ"
    return _DUCKDB_TYPES[arrow_type]


def schema_markdown() -> str:
    """The schema section of ``docs/store.md``: every view's columns with their Arrow and DuckDB types and
    meaning, generated from the declared schemas (``tests/test_store_schema_doc.py`` keeps the doc equal)."""
    from ..model.schema import TABLES

    def cell(text: str) -> str:
        return " ".join(text.replace("|", "\\|").split())

    out = []
    for kind in kinds():
        schema = schema_of(kind)
        if kind in DERIVED_SCHEMAS:
            row, meaning = DERIVED_ROWS[kind], {**DERIVED_COLUMNS, **KIND_COLUMNS.get(kind, {})}
        else:
            spec = TABLES[kind[len(TABLE_PREFIX) :]]
            row = f"one {spec.row} (the bundle's `{spec.name}` table, `docs/schema.md`)"
            meaning = {c.name: c.description + (f" ({c.unit})" if c.unit else "") for c in spec.columns}
            meaning = {**meaning, **KEY_COLUMNS}
        out += [
            f"### `{view_name(kind)}`",
            "",
            f"Files `{kind}/month=YYYY-MM/*.parquet`; a row is {cell(row)}.",
            "",
        ]
        out += ["| column | Arrow | DuckDB | meaning |", "|---|---|---|---|"]
        for f in schema:
            out.append(
                f"| `{f.name}` | `{f.type}` | `{duckdb_type(f.type)}` | {cell(meaning.get(f.name, ''))} |"
            )
        out.append(
            "| `month` | `string` | `VARCHAR` | the partition: `YYYY-MM` of the run's time (a directory name) |"
        )
        out.append("")
    return "\n".join(out)
