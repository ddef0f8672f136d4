"""Redact a Profile's tables (any input ``popprof.open`` reads) into a redacted bundle.

Vectorised: categorical columns are redacted by their CATEGORIES (a 3-million-row
``steps.program`` column with 400 programs costs 400 HMACs), string columns by
their distinct values (``pandas.factorize``), numbers are kept as they are, so
metrics, rules and diffs on the redacted bundle match the original.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd

from ..model.profile import Profile
from .redactor import Redactor

#: (table, column) -> identifier kind. Public vocabulary in these columns stays (allowlist).
IDENTIFIER_COLUMNS: dict[tuple[str, str], str] = {
    ("programs", "name"): "prog",
    ("steps", "program"): "prog",
    ("liveness", "program"): "prog",
    ("variables", "name"): "var",
    ("liveness_variables", "name"): "var",
    ("runs", "name"): "run",
    ("operations", "name"): "op",
    ("operations", "file"): "file",
    ("operations", "layer"): "layer",
    ("events", "name"): "evt",
    ("events", "channel"): "chan",
    ("threads", "process_name"): "proc",
    ("threads", "thread_name"): "thr",
    ("counters", "name"): "ctr",
    ("counters", "series"): "ser",
    ("cpu_samples", "function"): "evt",
    ("memory_totals", "category"): "vtx",
    ("tile_memory", "category"): "label",
    ("programs", "type"): "label",
    ("liveness", "program_type"): "label",
    ("steps", "program_type"): "label",
    ("steps", "category"): "label",
    ("programs", "category"): "label",
    ("events", "device_category"): "label",
    ("memory_totals", "group"): "label",
}
#: (table, column) -> free text (scrubbed, not pseudonymised as a whole).
TEXT_COLUMNS: frozenset[tuple[str, str]] = frozenset(
    {
        ("target", "source_format"),
        ("target", "ipu_arch"),
        ("target", "target_type"),
        ("target", "poplar_version"),
    }
)
JSON_COLUMNS: frozenset[tuple[str, str]] = frozenset({("events", "args")})


def _map_column(series: pd.Series, func, counts_into=None) -> pd.Series:
    """Apply ``func(value, count)`` to each distinct value of a string/categorical column, vectorised."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        cats = series.cat.categories
        codes = series.cat.codes.to_numpy()
        counts = np.bincount(codes[codes >= 0], minlength=len(cats)) if len(cats) else np.zeros(0, int)
        new = [func(c, int(n)) for c, n in zip(cats.tolist(), counts.tolist(), strict=True)]
        if len(set(new)) == len(new):
            return pd.Series(
                pd.Categorical.from_codes(codes, categories=pd.Index(new, dtype="str")), name=series.name
            )
        return (
            pd.Series(np.asarray(new, dtype=object)[codes], name=series.name)
            .where(codes >= 0)
            .astype("category")
        )
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    if len(uniques) == 0:
        return series
    counts = np.bincount(codes[codes >= 0], minlength=len(uniques))
    new = np.asarray(
        [func(u, int(n)) for u, n in zip(uniques.tolist(), counts.tolist(), strict=True)], dtype=object
    )
    out = pd.Series(new[np.where(codes >= 0, codes, 0)], name=series.name)
    out[codes < 0] = None
    return out.astype(series.dtype)


def _distinct(series: pd.Series) -> list[str]:
    if isinstance(series.dtype, pd.CategoricalDtype):
        return [str(c) for c in series.cat.categories]
    return [str(v) for v in pd.unique(series.dropna())]


def learn_profile(profile: Profile, redactor: Redactor) -> None:
    """First pass: learn usernames and hostnames from metadata and paths before scrubbing anything."""
    for key, value in profile.meta.items():
        redactor.learn(value, key)
    ops = profile.get("operations")
    if ops is not None:
        for value in pd.unique(ops["file"].dropna()):
            redactor.learn(str(value))


def redact_profile(profile: Profile, redactor: Redactor) -> Profile:
    """A redacted copy of ``profile`` (its tables and metadata); the original is not changed."""
    learn_profile(profile, redactor)
    policy = redactor.policy
    tables: dict[str, pd.DataFrame] = {}
    for name, frame in profile.tables.items():
        if name == "metadata":
            continue
        if policy.drops(f"table:{name}"):
            redactor.dropped.append(f"table:{name}")
            continue
        out = frame.copy()
        for column in frame.columns:
            where = (name, column)
            if policy.drops(f"column:{name}.{column}"):
                redactor.dropped.append(f"column:{name}.{column}")
                out[column] = None
                continue
            series = frame[column]
            if not (
                isinstance(series.dtype, pd.CategoricalDtype) or pd.api.types.is_string_dtype(series.dtype)
            ):
                continue
            if where in JSON_COLUMNS or where in TEXT_COLUMNS:
                out[column] = _map_column(series, lambda v, n: redactor.value(v))
            elif where == ("events", "name"):
                out[column] = _map_column(series, lambda v, n: event_name(v, redactor, n))
            else:
                kind = IDENTIFIER_COLUMNS.get(where, "label")
                out[column] = _map_column(series, lambda v, n, k=kind: redactor.identifier(k, v, n))
        tables[name] = out
    name = redactor.identifier("profile", profile.name)
    redacted = Profile(name, tables, source=profile.source)
    redacted.update_metadata(redact_metadata(profile.meta, redactor))
    return redacted


_SHA256 = re.compile(r"[0-9a-f]{64}")
#: The XPlane reader's name of a TPU or GPU copy (``Memcpy HtoD (copy-done.2)``, ``readers/xplane/planes.py``):
#: popprof's wrapper around the HLO op's own name.
_COPY_NAME = re.compile(r"(Memcpy (?:HtoD|DtoH|DtoD|PtoP) \()(.+)(\))", re.DOTALL)
#: The metadata key of the XPlane reader's TPU ops (``metrics/tpu_operations.py``).
TPU_OPS_KEY = "xplane.tpu_ops"
#: The keys of a TPU op record redacted as the events' columns are: the HLO op names as the events' ``name``
#: (a ``copy-done``'s ``copy_start`` too, so the pair still matches its events), the chip as the events'
#: ``device``.
_TPU_OP_COLUMNS: dict[str, tuple[str, str]] = {
    "name": ("events", "name"),
    "deduplicated_name": ("events", "name"),
    "copy_start": ("events", "name"),
    "device": ("events", "device"),
    "hlo_category": ("events", "device_category"),
}


def event_name(value: str, redactor: Redactor, count: int = 1) -> str:
    """An event's redacted name: a copy's ``Memcpy HtoD (<op>)`` keeps popprof's wrapper around the op's
    pseudonym (the one its TPU op record gets, :func:`redact_tpu_ops`); any other name is one identifier."""
    kind = IDENTIFIER_COLUMNS[("events", "name")]
    if not isinstance(value, str) or redactor.is_public(value):
        return redactor.identifier(kind, value, count)
    m = _COPY_NAME.fullmatch(value)
    if m is None:
        return redactor.identifier(kind, value, count)
    return m.group(1) + redactor.identifier(kind, m.group(2), count) + m.group(3)


def redact_tpu_ops(records: list, redactor: Redactor) -> list:
    """The XPlane reader's TPU op records (``xplane.tpu_ops``) redacted as the events they sum: ``name`` and
    ``deduplicated_name`` under the events' name pseudonyms, ``device`` as the events' device, ``hlo_category``
    kept when public (XLA's categories are) else a label; numbers kept; any other key and value decided as JSON
    (a key of no vocabulary is pseudonymised)."""
    out: list = []
    for record in records:
        if not isinstance(record, dict):
            out.append(redactor.decide_json(record))
            continue
        item: dict = {}
        for key, value in record.items():
            key = str(key)
            column = _TPU_OP_COLUMNS.get(key)
            if column is not None and isinstance(value, str):
                if column == ("events", "name"):
                    item[key] = event_name(value, redactor)
                else:
                    item[key] = redactor.identifier(IDENTIFIER_COLUMNS.get(column, "label"), value)
            else:
                item[redactor.decide(key, "key")] = redactor.decide_json(value, key)
        out.append(item)
    return out


def redact_sources(sources: list[dict], redactor: Redactor) -> list[dict]:
    """Source-file records with every key and value redacted like the tables' (issue 24 item 6): the file
    name pseudonymised (kind ``file``, extension kept), a ``sha256`` content hash kept so a reader can match
    the file, every other key decided as a JSON key and every other value (a string, a number, a nested
    object or list) as a JSON value under its key: public words and plain numbers stay, a number under a
    secret key (``password``, ``token``) is replaced like a string would be."""
    out = []
    for record in sources:
        if not isinstance(record, dict):
            continue
        item: dict = {}
        for key, value in record.items():
            key = str(key)
            if key == "name" and isinstance(value, str):
                stem, dot, ext = value.rpartition(".")
                pseudo = redactor.identifier("file", value)
                item["name"] = pseudo + (
                    f".{ext}" if dot and pseudo != value and ext.isalnum() and len(ext) <= 8 else ""
                )
            elif key == "sha256" and isinstance(value, str) and _SHA256.fullmatch(value):
                item[key] = value  # a content hash; anything else under this key is redacted below
            else:
                item[redactor.decide(key, "key")] = redactor.decide_json(value, key)
        out.append(item)
    return out


def redact_metadata(meta: dict[str, str], redactor: Redactor) -> dict[str, str]:
    """Metadata with keys scrubbed, values scrubbed (JSON-aware), source file names pseudonymised."""
    out: dict[str, str] = {}
    for key, value in meta.items():
        if redactor.policy.drops(f"metadata.{key}"):
            redactor.dropped.append("metadata key")  # its name is not published: it may be the secret
            continue
        new_key = redactor.text(key)
        if key == "source_files":
            try:
                sources = json.loads(value or "[]")
            except ValueError:
                sources = []
            out[new_key] = json.dumps(redact_sources(sources if isinstance(sources, list) else [], redactor))
        elif key == TPU_OPS_KEY and isinstance(records := _json_list(value), list):
            out[new_key] = json.dumps(redact_tpu_ops(records, redactor))
        else:
            out[new_key] = redactor.value(value, key)
    out["redacted"] = "true"
    out["redaction_key_fingerprint"] = redactor.key_fingerprint
    return out


def _json_list(value: str) -> list | None:
    """The JSON list ``value`` holds, or None (not JSON, or not a list: then redacted as any other value)."""
    try:
        parsed = json.loads(value or "[]")
    except (TypeError, ValueError):
        return None
    return parsed if isinstance(parsed, list) else None
