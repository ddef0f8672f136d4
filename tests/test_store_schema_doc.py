"""Issue 45, item 6: docs/store.md documents every column and type of the store (generated from the declared
schemas), and its SQL for readers without popprof gives what popprof's views give."""

from __future__ import annotations

from pathlib import Path

import duckdb
from store_helpers import MK2, ROOT

import popprof.store as store
from popprof.store.compact import compact
from popprof.store.schemas import kinds, schema_markdown, schema_of, view_name
from popprof.store.views import glob_escape, portable_sql

BEGIN = "<!-- begin generated: popprof.store.schemas.schema_markdown() -->\n"
END = "<!-- end generated -->"


def test_the_documented_schema_is_the_declared_one() -> None:
    doc = (ROOT / "docs" / "store.md").read_text()
    generated = doc[doc.index(BEGIN) + len(BEGIN) : doc.index(END)]
    assert generated == schema_markdown(), "regenerate docs/store.md's schema: schemas.schema_markdown()"
    for kind in kinds():  # every column of every kind, with its type
        section = generated.split(f"### `{view_name(kind)}`\n", 1)[1].split("### ", 1)[0]
        for field in schema_of(kind):
            assert f"| `{field.name}` | `{field.type}` |" in section, (kind, field.name)


def test_the_documented_sql_gives_what_the_views_give(tmp_path: Path) -> None:
    root = tmp_path / "a[b] store"
    store.init(root)
    for i, run_id in enumerate(["00123", "r2"]):
        store.add(root, [MK2], run_id=run_id, time=f"2026-0{i + 1}-01T00:00:00Z")
    compact(root, before="2026-02")  # January compacted, February per-run
    store.add(root, [MK2], run_id="r2", time="2026-02-02T00:00:00Z", replace=True)  # a superseded ingest
    (root / "metrics" / "month=2026-02" / "x--y--00000000--0123456789abcdef.parquet").write_bytes(
        next((root / "metrics" / "month=2026-02").glob("r2*.parquet")).read_bytes()
    )  # an orphan: a copy of a live file under an ingest no catalogue row knows
    wanted = ["metrics", "tables/tiles"]
    doc = (ROOT / "docs" / "store.md").read_text()
    assert portable_sql(["metrics"]).replace(";\n", ";\n\n").rstrip("\n") in doc
    plain = duckdb.connect()
    for statement in portable_sql(wanted, glob_escape(str(root))).strip().split(";\n"):
        plain.execute(statement)
    ours = store.open(root).duckdb()
    for view in ("runs", "metrics", "tiles"):
        order = "run_id, profile" + (", name" if view == "metrics" else ", tile" if view == "tiles" else "")
        got = plain.execute(f"SELECT * FROM {view} ORDER BY {order}").fetchall()
        expected = ours.execute(f"SELECT * FROM {view} ORDER BY {order}").fetchall()
        assert got == expected and got, view
