"""Analysis tables: popprof's own analyses as tables a query can name (``account``, ``gaps``, ``launches``,
``operators``, ``findings``), beside the profile's raw tables.

Each table is the output of the one function that defines its figures (``metrics/`` or the rules'
``check``), turned into a frame DuckDB can read: nothing here computes a figure. ``popprof query`` builds a
table only when the SQL names it (:func:`referenced`, DuckDB's own parser), once per profile
(``Profile.cached``), so a query of the raw tables pays nothing. A table that does not apply to the profile
(an IPU profile's ``launches``, a profile without device time's ``account``) is a one-line
:class:`~popprof.model.errors.UsageError` saying why (exit 2); one that applies and finds nothing is empty,
with its columns. ``docs/limits.md`` ("Analysis tables") lists the columns.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .model.errors import NotEvaluated, UsageError

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

    from .model.profile import Profile


@dataclass(frozen=True)
class AnalysisTable:
    """One analysis table: its ``name``, one line saying what a row is (``row``), the function that defines
    its figures (``defined_by``), its ``columns`` and ``build(profile, config)``, which gives the frame or
    raises the one-line error of a profile it does not apply to."""

    name: str
    row: str
    defined_by: str
    columns: tuple[str, ...]
    build: Callable[[Profile, Mapping | None], pd.DataFrame]


def _not_applicable(profile: Profile, name: str, why: str) -> UsageError:
    return UsageError(f"analysis table {name} does not apply to {profile.name}: {why}")


def _account(profile: Profile, config: Mapping | None) -> pd.DataFrame:
    from .metrics.account import run_account

    frame = run_account(profile)
    if frame.empty:
        raise _not_applicable(
            profile,
            "account",
            "it records no device time (no execution steps, device events or execution totals)",
        )
    return frame


def _trace_events(profile: Profile, name: str) -> None:
    """The one-line error unless ``profile`` is a trace whose events record device work."""
    from .trace import masks

    events = profile.get("events")
    if events is None or events.empty or not masks.device_activity_mask(profile).any():
        raise _not_applicable(
            profile, name, "it is computed from a trace's device events, and the profile has none"
        )


def _not_ipu(profile: Profile, name: str, why: str) -> None:
    """The one-line error when ``profile`` is an IPU's (``why``: what an IPU has not)."""
    from .rules.platform import platform_of

    if platform_of(profile) == "ipu":
        raise _not_applicable(profile, name, why)


def _gaps(profile: Profile, config: Mapping | None) -> pd.DataFrame:
    from .metrics.gaps import host_gap_table
    from .rules.base import plan
    from .rules.platform import platform_of
    from .trace import masks

    _trace_events(profile, "gaps")
    if masks.device_activity_mask(profile).all():
        raise _not_applicable(
            profile,
            "gaps",
            "the trace records no host event, so whether the host held the device cannot be told",
        )
    params = plan(["host.device-gaps"], config=config)[1]["host.device-gaps"]
    try:
        return host_gap_table(profile, float(params["min_gap_us"]), platform_of(profile))
    except NotEvaluated as exc:  # the rule's own reason (no gap ends at launched work)
        raise _not_applicable(profile, "gaps", str(exc)) from None


def _launches(profile: Profile, config: Mapping | None) -> pd.DataFrame:
    from .metrics.launches import kernel_launches

    _trace_events(profile, "launches")
    _not_ipu(profile, "launches", "an IPU's work has no launch calls (a GPU's has)")
    return kernel_launches(profile)


def _operators(profile: Profile, config: Mapping | None) -> pd.DataFrame:
    import pandas as pd

    from .metrics.operations import COLUMNS, operation_records

    _trace_events(profile, "operators")
    _not_ipu(profile, "operators", "an IPU's trace has no framework operators launching device work")
    records = operation_records(profile)
    for record in records:  # a list of shapes is JSON text in SQL (DuckDB's json functions read it)
        shapes = record["input_shapes"]
        record["input_shapes"] = None if shapes is None else json.dumps(shapes)
    frame = pd.DataFrame.from_records(records, columns=list(COLUMNS))
    frame["count"] = frame["count"].astype("int64")
    for column in ("device_time_us", "flops_per_call", "bytes_per_call", "tflops", "tbps"):
        frame[column] = frame[column].astype("float64")  # None: no cost model for the call (NULL in SQL)
    return frame


#: Columns of the ``findings`` table.
FINDING_COLUMNS = (
    "position",
    "rule_id",
    "severity",
    "title",
    "figure",
    "value",
    "threshold",
    "share",
    "gain_value",
    "gain_unit",
    "gain_device",
    "message",
)


def _findings(profile: Profile, config: Mapping | None) -> pd.DataFrame:
    import pandas as pd

    from .rules import check

    rows = []
    for position, finding in enumerate(check(profile, config=config).items, 1):
        doc = finding.to_dict()
        gain = doc["estimated_gain"] or {}
        rows.append(
            {
                "position": position,
                **{
                    k: doc[k]
                    for k in ("rule_id", "severity", "title", "figure", "value", "threshold", "share")
                },
                "gain_value": gain.get("value"),
                "gain_unit": gain.get("unit"),
                "gain_device": gain.get("device"),
                "message": doc["message"],
            }
        )
    frame = pd.DataFrame.from_records(rows, columns=list(FINDING_COLUMNS))
    for column in ("value", "threshold", "share", "gain_value"):
        frame[column] = frame[column].astype("float64")
    return frame


def _table(name: str, row: str, defined_by: str, columns, build) -> AnalysisTable:
    return AnalysisTable(name, row, defined_by, tuple(columns), build)


def _tables() -> dict[str, AnalysisTable]:
    from .metrics.account import COLUMNS as ACCOUNT_COLUMNS
    from .metrics.gaps import GAP_COLUMNS
    from .metrics.launches import LAUNCH_COLUMNS
    from .metrics.operations import COLUMNS as OPERATOR_COLUMNS

    return {
        t.name: t
        for t in (
            _table(
                "account",
                "device: the time account of its window (run rows), the parts summing to window_us",
                "popprof.metrics.account.run_account",
                ACCOUNT_COLUMNS,
                _account,
            ),
            _table(
                "gaps",
                "idle gap host.device-gaps judges (its min_gap_us), the host's part and the host work in it",
                "popprof.metrics.gaps.host_gap_table",
                GAP_COLUMNS,
                _gaps,
            ),
            _table(
                "launches",
                "launch call joined to its GPU work: HTA's launch delay, CPU and GPU durations",
                "popprof.metrics.launches.kernel_launches",
                LAUNCH_COLUMNS,
                _launches,
            ),
            _table(
                "operators",
                "GPU operator x input shapes: calls, device time, FLOPs and bytes, the roofline",
                "popprof.metrics.operations.operation_records",
                OPERATOR_COLUMNS,
                _operators,
            ),
            _table(
                "findings",
                "finding of the rules (check's defaults or --config), ranked by estimated gain",
                "popprof.rules.check",
                FINDING_COLUMNS,
                _findings,
            ),
        )
    }


#: The analysis tables by name, in the order ``popprof tables`` lists them.
NAMES: tuple[str, ...] = ("account", "gaps", "launches", "operators", "findings")


def analysis_tables() -> dict[str, AnalysisTable]:
    """Every analysis table by name (:data:`NAMES` order)."""
    return _tables()


_WORDS = re.compile(r"\b(" + "|".join(NAMES) + r")\b", re.I)


def mentioned(sql: str) -> bool:
    """Whether ``sql`` holds an analysis table's name as a word (cheap, no DuckDB: a command deciding how to
    read before DuckDB is imported; :func:`referenced` says which tables the SQL reads)."""
    return _WORDS.search(sql) is not None


def referenced(con: duckdb.DuckDBPyConnection, sql: str) -> list[str]:
    """The analysis tables ``sql`` reads, by DuckDB's parser (``duckdb.get_table_names``, per statement, on the
    sandboxed ``con``: the parser binds no file); a name only in a comment, a string or a CTE is not read.
    SQL DuckDB cannot parse names the words it holds (the query's own error follows)."""
    import duckdb

    if not mentioned(sql):
        return []
    try:
        found: set[str] = set()
        for statement in con.extract_statements(sql):
            found |= {n.lower() for n in duckdb.get_table_names(statement.query, connection=con)}
    except duckdb.Error:
        found = {m.lower() for m in _WORDS.findall(sql)}
    return [n for n in NAMES if n in found]


def build(profile: Profile, name: str, config: Mapping | None = None) -> pd.DataFrame:
    """Analysis table ``name`` of ``profile``, built once per profile and configuration (``Profile.cached``,
    key ``analysis_tables.<name>``, then the rules' settings when given): a UsageError when it does not
    apply."""
    from .io.config import Config

    table = analysis_tables()[name]
    rules = Config.of(config).rules
    key = f"analysis_tables.{name}" + (f":{json.dumps(rules, sort_keys=True, default=str)}" if rules else "")
    return profile.cached(key, lambda: _conformed(table.build(profile, config)))


def _conformed(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with one SQL type per column: an object column of text as a categorical (VARCHAR in SQL,
    missing as NULL: pandas may hold NaN there), one of whole numbers (a device's rank, None on an IPU) as
    nullable Int64."""
    import numbers

    import pandas as pd

    out = frame.copy()
    for column in out.columns:
        if out[column].dtype != object:
            continue
        values = [v for v in out[column] if v is not None and v == v]
        if all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in values) and values:
            out[column] = pd.array(
                [None if v is None or v != v else int(v) for v in out[column]], dtype="Int64"
            )
        elif all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values) and values:
            out[column] = pd.array([None if v is None or v != v else v for v in out[column]], dtype="Float64")
        else:
            out[column] = pd.Categorical([None if v is None or v != v else str(v) for v in out[column]])
    return out
