"""Values no reader writes, read as missing: the check the bundle reader and the ``.pop`` reader share.

A tampered bundle, or a damaged ``profile.pop`` read through pva, can hold sizes below zero, cycle counts
near the 64-bit maximum (their sums wrap around into negative totals), runs that end before they start:
figures built on them would be silently absurd (a negative peak of live bytes, an iteration of minus a
millisecond). :func:`check_measures` reads them as missing, with one warning per table.
"""

from __future__ import annotations

from pathlib import Path

from ..model.schema import TABLES


class ImpossibleValueWarning(UserWarning):
    """A table holds a value that cannot be right (read as missing)."""


#: Units of measures that cannot be below zero (sizes, cycle counts): a negative one is read as missing.
_NONNEGATIVE_UNITS = frozenset({"bytes", "cycles"})
#: Measures of those units that may be negative: an allocation event's ``bytes`` is negative for a free.
_SIGNED_MEASURES = frozenset({("allocations", "bytes")})
#: Largest size or cycle count one row may hold (256 TiB; 2.4 days at 1.33 GHz): beyond it a bundle was
#: tampered with, and sums of a few thousand such values (a table's total) would overflow 64-bit integers
#: into negative totals.
MEASURE_CAP = 1 << 48
#: Durations: a negative or not finite one is read as zero, as the trace reader reads one.
_DURATIONS = frozenset({("events", "dur_us"), ("cpu_slices", "dur_us"), ("execution_totals", "time_us")})


def check_measures(tables: dict, path: Path, category: type[Warning] = ImpossibleValueWarning) -> None:
    """Values no reader writes, read as missing with one warning per table (figures built on them would be
    absurd: a negative peak of live bytes, a run that ends before it starts):

    - a size or cycle count below zero, not finite or above :data:`MEASURE_CAP`: missing (its row dropped
      where the column cannot be missing);
    - a duration below zero or not finite: zero, as the trace reader reads it;
    - a run whose end is before its start, or a time not finite: both times missing (the run's time comes
      from its cycles then);
    - a tile whose bytes excluding gaps exceed those including them: the former missing.

    ``tables`` (name -> DataFrame, before :func:`~popprof.model.schema.conform`) is changed in place; the
    warnings are of ``category``.
    """
    import warnings

    import numpy as np
    import pandas as pd

    for name, frame in list(tables.items()):
        if not isinstance(frame, pd.DataFrame) or frame.empty or name not in TABLES:
            continue  # a table built later (Deferred) is not checked
        columns = {c.name: c for c in TABLES[name].columns}
        changed: list[str] = []
        drop = np.zeros(len(frame), dtype=bool)
        for column in frame.columns:
            spec = columns.get(column)
            if spec is None or (name, column) in _SIGNED_MEASURES:
                continue
            duration = (name, column) in _DURATIONS
            if spec.unit not in _NONNEGATIVE_UNITS and not duration:
                continue
            values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
            wrong = (values < 0) | np.isinf(values) | (np.isnan(values) & frame[column].notna().to_numpy())
            if not duration:
                wrong |= values > MEASURE_CAP
            if not wrong.any():
                continue
            changed.append(
                f"{column} (below zero or not finite)"
                if duration
                else f"{column} (below zero, not finite or huge)"
            )
            if duration:
                frame = frame.assign(**{column: np.where(wrong, 0.0, values)})
            elif spec.nullable:
                frame = frame.assign(**{column: pd.Series(values, index=frame.index).mask(wrong)})
            else:
                drop |= wrong
        if name == "tiles" and {"bytes_incl_gaps", "bytes_excl_gaps"} <= set(frame.columns):
            incl = pd.to_numeric(frame["bytes_incl_gaps"], errors="coerce").astype("float64")
            excl = pd.to_numeric(frame["bytes_excl_gaps"], errors="coerce").astype("float64")
            wrong = excl > incl  # a tile's bytes without its gaps above those with them
            if wrong.any():
                changed.append("bytes_excl_gaps (above bytes_incl_gaps)")
                frame = frame.assign(bytes_excl_gaps=excl.mask(wrong))
        if name == "runs" and {"start_us", "end_us"} <= set(frame.columns):
            start = pd.to_numeric(frame["start_us"], errors="coerce").astype("float64")
            end = pd.to_numeric(frame["end_us"], errors="coerce").astype("float64")
            wrong = ~np.isfinite(start) & start.notna() | ~np.isfinite(end) & end.notna() | (end < start)
            if wrong.any():
                changed.append("start_us, end_us (an end before its start, or not finite)")
                frame = frame.assign(start_us=start.mask(wrong), end_us=end.mask(wrong))
        if not changed:
            continue
        if drop.any():
            frame = frame[~drop].reset_index(drop=True)
        warnings.warn(
            f"{path}: table {name!r}: impossible values read as missing: {'; '.join(changed)}",
            category,
            stacklevel=3,
        )
        tables[name] = frame
