"""archive.a is not read (its member -> tile naming is not public): it gets one clear error, not a misreading."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from popprof.model.errors import InputError
from popprof.readers import open_profile, reader_modules


def ar_archive(members: dict[str, bytes]) -> bytes:
    """A System V ``ar`` archive: the magic, then a 60-byte header and the data (padded to even) per member."""
    out = bytearray(b"!<arch>\n")
    for name, data in members.items():
        header = (f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{644:<8}{len(data):<10}").encode() + b"`\n"
        assert len(header) == 60
        out += header + data + (b"\n" if len(data) % 2 else b"")
    return bytes(out)


def fake_elf() -> bytes:
    return b"\x7fELF\x02\x01\x01\x00" + bytes(56) + b"\x00" * 64


def test_no_reader_claims_an_archive(tmp_path):
    path = tmp_path / "archive.a"
    path.write_bytes(ar_archive({"tile0.elf": fake_elf(), "tile1.elf": fake_elf()}))
    head = path.read_bytes()
    assert [m.FORMAT for m in reader_modules() if m.sniff(path, head)] == []
    with pytest.raises(InputError, match="not a recognised profile format"):
        open_profile(path)


@pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("ar") is None, reason="needs gcc and ar")
def test_real_object_archive_is_refused(tmp_path):
    source = tmp_path / "t.c"
    source.write_text("int data[64] = {1};\nint f(int x) { return x + data[x & 63]; }\n")
    subprocess.run(["gcc", "-c", str(source), "-o", str(tmp_path / "t.o")], check=True)
    subprocess.run(["ar", "rcs", str(tmp_path / "archive.a"), str(tmp_path / "t.o")], check=True)
    with pytest.raises(InputError, match="not a recognised profile format"):
        open_profile(tmp_path / "archive.a")
