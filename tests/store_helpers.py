"""Helpers of the store tests: a CLI runner and small stores built from the fixtures."""

from __future__ import annotations

from pathlib import Path

from popprof.cli import main

ROOT = Path(__file__).resolve().parent.parent
MK2 = ROOT / "fixtures" / "mk2_training.popprof"
TWO_RANKS = ROOT / "fixtures" / "real" / "traces" / "two_ranks"


def run(capsys, *args: object) -> tuple[int, str, str]:
    """Run the CLI; returns (exit code, stdout, stderr)."""
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def flip_in_data_page(file: Path, column: str = "value") -> None:
    """Flip one byte inside the page data of ``column``'s last data page in a store file (two bytes before
    the column chunk ends: past every page header, where only the page's CRC-32 tells)."""
    import pyarrow.parquet as pq

    group = pq.read_metadata(file).row_group(0)
    chunk = next(c for c in (group.column(i) for i in range(group.num_columns)) if c.path_in_schema == column)
    end = (chunk.dictionary_page_offset or chunk.data_page_offset) + chunk.total_compressed_size
    data = bytearray(file.read_bytes())
    data[end - 2] ^= 0xFF
    file.write_bytes(bytes(data))
