"""Every kind of bad input the readers must refuse: exit 2, one line naming the file, input untouched.

One table of hand-made bad inputs, each run through ``popprof summary`` (the
CLI) with and without the pva test double on ``sys.path``. The expected message
fragments are written here by hand, not taken from the code under test.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from popprof.cli import main

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
BUNDLE = FIXTURES / "mk2_training.popprof"


def _text(name: str, content: str) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        path = tmp / name
        path.write_text(content, encoding="utf-8")
        return path

    return make


def _bytes(name: str, content: bytes) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        path = tmp / name
        path.write_bytes(content)
        return path

    return make


def _trace(name: str, events: list) -> Callable[[Path], Path]:
    return _text(name, json.dumps({"traceEvents": events}))


def _missing(tmp: Path) -> Path:
    return tmp / "nowhere" / "profile.pop"


def _dir_without_profile(tmp: Path) -> Path:
    path = tmp / "run"
    path.mkdir()
    (path / "notes.txt").write_text("not a profile\n")
    (path / "app.json").write_text("{}")
    return path


def _bundle(edit: Callable[[Path], None]) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        path = tmp / "copy.popprof"
        shutil.copytree(BUNDLE, path)
        edit(path)
        return path

    return make


def _drop_steps(bundle: Path) -> None:
    (bundle / "steps.parquet").unlink()


def _newer_format(bundle: Path) -> None:
    manifest = bundle / "manifest.json"
    data = json.loads(manifest.read_text())
    data["format_version"] = int(data["format_version"]) + 1
    manifest.write_text(json.dumps(data))


def _truncated_gzip_trace(tmp: Path) -> Path:
    good = gzip.compress(
        json.dumps(
            {
                "traceEvents": [
                    {"ph": "X", "name": f"e{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1} for i in range(200)
                ]
            }
        ).encode()
    )
    path = tmp / "cut.json.gz"
    path.write_bytes(good[:40])
    return path


PARAVIEW = '<?xml version="1.0"?>\n<VTKFile type="PImageData" version="0.1">\n</VTKFile>\n'

#: (case id, maker, fragment expected on the one error line)
CASES: list[tuple[str, Callable[[Path], Path], str]] = [
    ("missing file", _missing, "no such file"),
    ("name too long for the file system", lambda tmp: tmp / ("x" * 300), "File name too long"),
    ("directory without a profile", _dir_without_profile, "holds no profile"),
    ("empty file", _bytes("profile.json", b""), "the file is empty"),
    ("empty profile.pop", _bytes("profile.pop", b""), "the file is empty"),
    (
        "JSON that is not a profile",
        _text("data.json", '{"hello": 1, "values": [1, 2, 3]}'),
        "not a recognised profile format",
    ),
    ("JSON array of numbers", _text("numbers.json", "[1, 2, 3]"), "not a recognised profile format"),
    (
        "text that is not a summary",
        _text("notes.txt", "Target:\nsome words from a log\nno figures\n"),
        "not a recognised profile format",
    ),
    (
        "summary headings without figures",
        _text("hollow.txt", "Target:\n  Number of IPUs:\n  Tiles per IPU:\n"),
        "holds no figures",
    ),
    (
        "truncated Chrome trace JSON",
        _text("cut.json", '{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "ti'),
        "not valid JSON",
    ),
    (
        "truncated SDK 1.x JSON",
        _text("cut_graph.json", '{"graphProfile": {"target": {"numTiles": 12'),
        "truncated JSON: the file ends inside its JSON value",
    ),
    ("gzip that is not gzip", _bytes("trace.json.gz", b"\x1f\x8b" + b"not deflate data" * 8), "corrupt gzip"),
    ("truncated gzip", _truncated_gzip_trace, "gzip data is truncated"),
    (
        "events all missing required fields",
        _trace("fields.json", [{"ph": "X", "name": "a"}, {"ph": "X", "pid": 1}]),
        "no usable trace events",
    ),
    (
        "only an E without a B",
        _trace("e_only.json", [{"ph": "E", "pid": 1, "tid": 1, "ts": 5}]),
        "no usable trace events",
    ),
    ("bundle missing a Parquet file", _bundle(_drop_steps), "missing steps.parquet"),
    ("bundle of a newer format version", _bundle(_newer_format), "newer than this popprof supports"),
    ("ParaView .pvti", _text("image.pvti", PARAVIEW), "ParaView image"),
]

#: Inputs only pva can read: without the SDK the message says so; with the double, pva's refusal.
PVA_CASES: list[tuple[str, Callable[[Path], Path], str]] = [
    ("corrupt profile.pop", _bytes("profile.pop", b"SQLite format 3\x00" + b"\x00" * 200), "pva cannot open"),
    ("truncated profile.pop", _bytes("profile.pop", b"PK\x03\x04\x14\x00"), "pva cannot open"),
    ("corrupt .pvti", _bytes("run_4532.pvti", b"SQLite format 3\x00" + b"\x00" * 200), "pva cannot open"),
    (
        "gzipped profile.pop",
        _bytes("profile.pop.gz", gzip.compress(b"SQLite format 3\x00" + b"\x00" * 64)),
        "gunzip",
    ),
]


def _fingerprint(path: Path) -> dict[str, str] | None:
    if not os.path.exists(path):  # False (not an error) for a name too long for the file system
        return None
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(p.relative_to(path.parent)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def _refused(capsys, path: Path, fragment: str) -> None:
    before = _fingerprint(path)
    code = main(["summary", str(path)])
    out, err = capsys.readouterr()
    assert code == 2, err
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("popprof: error: "), err
    assert path.name in err and fragment in err, err
    assert "Traceback" not in err
    assert _fingerprint(path) == before  # the input is never modified
    if before is not None and os.path.isdir(path):
        assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # nothing written beside it


@pytest.mark.parametrize("maker, fragment", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_exits_2_with_one_line(capsys, tmp_path, maker, fragment):
    _refused(capsys, maker(tmp_path), fragment)


@pytest.mark.parametrize("maker, fragment", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_exits_2_with_one_line_with_pva(capsys, tmp_path, pva_double, maker, fragment):
    _refused(capsys, maker(tmp_path), fragment)


@pytest.mark.parametrize("maker, fragment", [c[1:] for c in PVA_CASES], ids=[c[0] for c in PVA_CASES])
def test_pva_input_without_the_sdk_says_so(capsys, tmp_path, monkeypatch, maker, fragment):
    monkeypatch.setitem(__import__("sys").modules, "pva", None)  # import pva fails
    path = maker(tmp_path)
    _refused(capsys, path, "gunzip" if fragment == "gunzip" else "Poplar SDK's pva module")


@pytest.mark.parametrize("maker, fragment", [c[1:] for c in PVA_CASES], ids=[c[0] for c in PVA_CASES])
def test_pva_input_pva_cannot_read(capsys, tmp_path, pva_double, maker, fragment):
    _refused(capsys, maker(tmp_path), fragment)


def test_unreadable_file_exits_2_not_internal_error(capsys, tmp_path, monkeypatch):
    from popprof.io import files
    from popprof.readers import registry

    def denied(path, size=files.HEAD_BYTES):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(
        registry, "read_head", denied
    )  # as a file without read permission (tests may run as root)
    path = tmp_path / "locked.json"
    path.write_text("[]")
    _refused(capsys, path, "cannot read: Permission denied")


def test_unlistable_directory_exits_2(capsys, tmp_path, monkeypatch):
    from popprof.readers import opening

    def denied(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(opening, "_run_directory_entries", denied)
    path = tmp_path / "run"
    path.mkdir()
    _refused(capsys, path, "cannot list the directory: Permission denied")
