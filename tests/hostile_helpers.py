"""Helpers for the hostile-input tests: run popprof in a child process under memory and time limits.

A reproduction that once took gigabytes must not take the test machine with it:
the child gets an address-space limit (RLIMIT_AS), so a regression shows as a
MemoryError (exit 3) or a timeout, never as swapping.
"""

from __future__ import annotations

import gzip
import os
import resource
import subprocess
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
#: Address space of a child: popprof with pandas, pyarrow and DuckDB loaded needs about 0.6 GiB.
CHILD_MEMORY = 1536 << 20


@dataclass
class Run:
    code: int | None  # None: killed by the time limit
    out: str
    err: str
    seconds_limit: float

    def one_error_line(self) -> str:
        """The single stderr line of an exit-2 run (asserts there is exactly one, and no traceback)."""
        lines = self.err.splitlines()
        assert self.code == 2, f"exit {self.code}, stderr: {self.err[-2000:]}"
        assert len(lines) == 1 and lines[0].startswith("popprof: error: "), self.err[-2000:]
        return lines[0]


def _limit(memory: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return apply


def run_limited(
    *args: object,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    memory: int = CHILD_MEMORY,
    seconds: float = 60,
    stdin: int | None = subprocess.DEVNULL,
    shell: bool = False,
) -> Run:
    """``popprof ARGS`` in a child process with an address-space and a wall-time limit."""
    # few malloc arenas: each thread's arena reserves 64 MiB of address space, which an RLIMIT_AS counts
    full_env = {**os.environ, "MALLOC_ARENA_MAX": "2", **(env or {})}
    full_env.pop("POPPROF_DEBUG", None)
    command: object = [sys.executable, "-m", "popprof", *map(str, args)]
    if shell:
        command = " ".join(map(str, args)).replace("popprof ", f"{sys.executable} -m popprof ", 1)
        command = ["bash", "-c", command]
    try:
        done = subprocess.run(
            command,
            cwd=cwd,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=seconds,
            preexec_fn=_limit(memory),
            stdin=stdin,
        )
    except subprocess.TimeoutExpired as exc:
        return Run(None, _text(exc.stdout), _text(exc.stderr), seconds)
    return Run(done.returncode, done.stdout, done.stderr, seconds)


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode("utf-8", "replace")


def gzip_with_filler(path: Path, head: bytes, filler: bytes, total: int, tail: bytes = b"") -> Path:
    """Write ``head`` + ``filler`` repeated to ``total`` bytes + ``tail`` as gzip, streamed (never in memory)."""
    block = filler * max(1, (1 << 20) // len(filler))
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    with open(path, "wb") as handle:
        handle.write(compressor.compress(head))
        left = total
        while left > 0:
            piece = block[:left]
            handle.write(compressor.compress(piece))
            left -= len(piece)
        handle.write(compressor.compress(tail))
        handle.write(compressor.flush())
    with gzip.open(path) as check:
        assert check.read(len(head)) == head
    return path
