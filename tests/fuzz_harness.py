"""The bounded fuzz suite's machinery: seeds, mutations, and a worker that runs cases in-process under limits.

Cases run in one forked child per batch (so the test process keeps its memory): the
child caps its address space (RLIMIT_AS), and for every case resets its peak-RSS mark,
arms a per-case timer, runs every reader directly and ``popprof summary`` / ``check``
through :func:`popprof.cli.main` in-process, and checks the contract:

- exit code 0, 1 or 2 only (never 3, a traceback, a hang or a crash);
- on exit 2, exactly one stderr line, ``popprof: error: ...`` (warning lines aside);
- a reader returns a Profile or raises PopprofError, nothing else;
- no input modified (SHA-256 of every input file before and after);
- peak memory above the starting RSS at most 4x the input size plus :data:`ALLOWANCE`;
- at most :data:`CASE_SECONDS` of CPU per case (the batch as a whole has a wall-time limit, for hangs).

``POPPROF_FUZZ_CASES`` (mutations per seed) and ``POPPROF_FUZZ_SEED`` make a longer or
different run; ``POPPROF_FUZZ=long`` multiplies the cases by 10 for local use.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import multiprocessing
import os
import re
import resource
import shutil
import signal
import traceback
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
#: Memory a case may use beyond 4x its input: the limits' own floors (64 MiB of gzip before the ratio
#: check, a 1 MiB line, a chunk) plus the tables a small profile becomes and the rules' working set.
ALLOWANCE = 320 << 20
#: Address space the worker may add to what it inherits from the forking test process (popprof with pandas,
#: pyarrow and DuckDB loaded takes about 0.6 GiB; a long pytest process has reserved more by then).
WORKER_MEMORY = 2560 << 20
CASE_SECONDS = 20.0


class CaseTimeout(BaseException):
    """The per-case timer fired."""


@dataclass
class Case:
    """One fuzz input: a file or bundle directory written by ``make`` into a directory."""

    name: str
    make: Callable[[Path], Path]


@dataclass
class Outcome:
    case: str
    problems: list[str] = field(default_factory=list)
    codes: dict[str, int] = field(default_factory=dict)
    peak_bytes: int = 0
    input_bytes: int = 0
    seconds: float = 0.0


# -- seeds -------------------------------------------------------------------------------------------


def seed_files() -> dict[str, list[Path]]:
    """Seed files by family: generated fixtures and the real public samples."""
    return {
        "text": sorted((FIXTURES / "text_summary").glob("*.txt"))[:2]
        + sorted((FIXTURES / "real/poplar").glob("*.txt")),
        "sdk1": [FIXTURES / "sdk1_json/mk1_noexec.json", FIXTURES / "sdk1_json/mk2_training.json"],
        "trace": [
            FIXTURES / "traces/begin_end.json",
            FIXTURES / "traces/training_loop.json.gz",
            FIXTURES / "real/traces/cpu_only_rank-34.json.gz",
            FIXTURES / "real/traces/amd_mi250_minitoy.json.gz",
            FIXTURES / "real/traces/nccl_data.json.gz",
        ],
        "bundle": [FIXTURES / "mk2_training.popprof", FIXTURES / "mk1_noexec.popprof"],
    }


def case_count(default: int) -> int:
    """Mutations per seed: ``POPPROF_FUZZ_CASES``, else ``default`` (x10 with ``POPPROF_FUZZ=long``)."""
    if os.environ.get("POPPROF_FUZZ_CASES"):
        return int(os.environ["POPPROF_FUZZ_CASES"])
    return default * (10 if os.environ.get("POPPROF_FUZZ") == "long" else 1)


def rng_for(label: str) -> np.random.Generator:
    base = int(os.environ.get("POPPROF_FUZZ_SEED", "14"))
    return np.random.default_rng([base, int(hashlib.sha256(label.encode()).hexdigest()[:8], 16)])


# -- mutations of bytes ------------------------------------------------------------------------------

_NUMBER = re.compile(rb"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_WEIRD_NUMBERS = (
    b"1e309",
    b"-1",
    b"-99999999999999999999999",
    b"NaN",
    b"Infinity",
    b"99999999999999999999",
    b"0.0000001",
    b"1,000,000",
    b"0x10",
    b"",
    b"-0",
)
_WEIRD_VALUES = (b'"x"', b"[]", b"{}", b"null", b"true", b'"\\ud800"', b'"\\u0000"', b"[[[[[[[[1]]]]]]]]")
_UNICODE = ("\u202e", "\u0000", "\ufeff", "\ud83d\ude00", "é", "\u2028", "\x1b[31m", "\udcff")


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True) or [data]


def mutate(data: bytes, rng: np.random.Generator, json_like: bool) -> tuple[str, bytes]:
    """One random mutation of ``data``: (what was done, the mutated bytes)."""
    kinds = ["truncate", "flip", "delete_lines", "duplicate_lines", "numbers", "unicode", "nest", "splice"]
    if json_like:
        kinds.append("types")
    kind = kinds[int(rng.integers(len(kinds)))]
    n = len(data)
    if kind == "truncate":
        cut = int(rng.integers(0, max(1, n)))
        return f"truncate@{cut}", data[:cut]
    if kind == "flip":
        buf = bytearray(data)
        for _ in range(int(rng.integers(1, 16))):
            if buf:
                buf[int(rng.integers(len(buf)))] ^= 1 << int(rng.integers(8))
        return "flip", bytes(buf)
    lines = _lines(data)
    if kind == "delete_lines":
        keep = rng.random(len(lines)) > rng.uniform(0.05, 0.5)
        return "delete_lines", b"".join(line for line, k in zip(lines, keep, strict=True) if k)
    if kind == "duplicate_lines":
        out = []
        for line in lines:
            out.append(line)
            if rng.random() < 0.1:
                out.extend([line] * int(rng.integers(1, 50)))
        return "duplicate_lines", b"".join(out)
    if kind == "numbers":
        matches = list(_NUMBER.finditer(data))
        if not matches:
            return "numbers(none)", data
        chosen = {
            int(i)
            for i in rng.choice(len(matches), min(len(matches), int(rng.integers(1, 30))), replace=False)
        }
        out, last = [], 0
        for i, match in enumerate(matches):
            if i in chosen:
                out += [data[last : match.start()], _WEIRD_NUMBERS[int(rng.integers(len(_WEIRD_NUMBERS)))]]
                last = match.end()
        return "numbers", b"".join(out) + data[last:]
    if kind == "types":
        matches = list(re.finditer(rb':\s*(-?\d[\d.eE+-]*|"[^"\\]{0,40}"|true|false|null)', data))
        if not matches:
            return "types(none)", data
        chosen = {
            int(i)
            for i in rng.choice(len(matches), min(len(matches), int(rng.integers(1, 10))), replace=False)
        }
        out, last = [], 0
        for i, match in enumerate(matches):
            if i in chosen:
                out += [data[last : match.start(1)], _WEIRD_VALUES[int(rng.integers(len(_WEIRD_VALUES)))]]
                last = match.end(1)
        return "types", b"".join(out) + data[last:]
    if kind == "unicode":
        buf = bytearray(data)
        for _ in range(int(rng.integers(1, 10))):
            char = _UNICODE[int(rng.integers(len(_UNICODE)))].encode("utf-8", "surrogatepass")
            at = int(rng.integers(0, len(buf) + 1))
            buf[at:at] = char
        return "unicode", bytes(buf)
    if kind == "nest":
        depth = int(rng.choice([50, 300, 3000, 30000]))
        at = int(rng.integers(0, n + 1))
        opener = b"[" if rng.random() < 0.5 else b'{"a":'
        closer = b"]" if opener == b"[" else b"}"
        return f"nest{depth}", data[:at] + opener * depth + closer * depth * int(rng.integers(0, 2)) + data[
            at:
        ]
    # splice: a piece of the file repeated somewhere else
    lo = int(rng.integers(0, max(1, n)))
    hi = min(n, lo + int(rng.integers(1, 4096)))
    at = int(rng.integers(0, n + 1))
    return "splice", data[:at] + data[lo:hi] * int(rng.integers(1, 20)) + data[at:]


def raw_bytes(path: Path) -> tuple[bytes, bool]:
    """The seed's content (gunzipped) and whether it was gzip."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        return gzip.decompress(data), True
    return data, False


def file_cases(path: Path, count: int) -> list[Case]:
    """``count`` mutations of a seed file, plus gzip forms: kept as is, cut off, and a bomb after its head."""
    data, was_gzip = raw_bytes(path)
    json_like = data.lstrip()[:1] in (b"{", b"[")
    rng = rng_for(path.name)
    cases = []
    suffix = "".join(path.suffixes[-2:]) if was_gzip else path.suffix
    for i in range(count):
        what, mutated = mutate(data, rng, json_like)
        compress = was_gzip or rng.random() < 0.2
        name = f"{path.name}#{i}:{what}{'+gz' if compress and not was_gzip else ''}"
        out_suffix = suffix if was_gzip or not compress else suffix + ".gz"
        cases.append(Case(name, _writer(mutated, compress, out_suffix)))
    gz_suffix = suffix if was_gzip else suffix + ".gz"
    whole = gzip.compress(data, mtime=0)
    cases.append(
        Case(f"{path.name}:gzip-cut", _writer(whole[: max(10, len(whole) * 2 // 3)], False, gz_suffix))
    )
    cases.append(Case(f"{path.name}:gzip-bomb", _bomb(data[:4096], gz_suffix)))
    return cases


def _writer(data: bytes, compress: bool, suffix: str) -> Callable[[Path], Path]:
    def make(where: Path) -> Path:
        target = where / f"input{suffix}"
        target.write_bytes(gzip.compress(data, mtime=0) if compress else data)
        return target

    return make


_SPACES: list[bytes] = []


def _gzip_spaces() -> bytes:
    """128 MiB of spaces as one gzip member (about 130 KB), made once."""
    if not _SPACES:
        compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        block = b" " * (1 << 20)
        _SPACES.append(b"".join(compressor.compress(block) for _ in range(128)) + compressor.flush())
    return _SPACES[0]


def _bomb(head: bytes, suffix: str) -> Callable[[Path], Path]:
    """``head`` then 128 MiB of spaces (two gzip members, about 130 KB): the gzip-ratio limit must stop it."""

    def make(where: Path) -> Path:
        target = where / f"bomb{suffix}"
        target.write_bytes(gzip.compress(head, mtime=0) + _gzip_spaces())
        return target

    return make


# -- tampered bundles ----------------------------------------------------------------------------

_JSON_VALUES: tuple[object, ...] = ("x", 1, -1, 1.5, None, True, [], ["a"], {}, {"a": 1}, "../x", 10**30)


def bundle_cases(path: Path, count: int) -> list[Case]:
    """Tampered copies of a bundle: manifest fields of other types, cut or flipped Parquet, swapped files."""
    rng = rng_for(path.name)
    manifest = json.loads((path / "manifest.json").read_text())
    parquet = sorted(p.name for p in path.glob("*.parquet"))
    cases = []
    for i in range(count):
        kind = [
            "manifest_field",
            "table_field",
            "manifest_bytes",
            "parquet_flip",
            "parquet_cut",
            "parquet_swap",
            "parquet_missing",
        ][int(rng.integers(7))]
        cases.append(
            Case(
                f"{path.name}#{i}:{kind}",
                _tampered(path, kind, manifest, parquet, int(rng.integers(1 << 30))),
            )
        )
    return cases


def _tampered(
    source: Path, kind: str, manifest: dict, parquet: list[str], seed: int
) -> Callable[[Path], Path]:
    def make(where: Path) -> Path:
        rng = np.random.default_rng(seed)
        target = where / source.name
        shutil.copytree(source, target)
        doc = json.loads(json.dumps(manifest))
        pick = _JSON_VALUES[int(rng.integers(len(_JSON_VALUES)))]
        if kind == "manifest_field":
            key = sorted(doc)[int(rng.integers(len(doc)))]
            doc[key] = pick
        elif kind == "table_field":
            table = sorted(doc["tables"])[int(rng.integers(len(doc["tables"])))]
            entry = doc["tables"][table]
            entry[sorted(entry)[int(rng.integers(len(entry)))]] = pick
        if kind in ("manifest_field", "table_field"):
            (target / "manifest.json").write_text(json.dumps(doc))
        elif kind == "manifest_bytes":
            raw = bytearray((target / "manifest.json").read_bytes())
            cut = int(rng.integers(len(raw)))
            raw[cut] ^= 0x20
            (target / "manifest.json").write_bytes(bytes(raw[: len(raw) - int(rng.integers(0, 2)) * cut]))
        else:
            victim = target / parquet[int(rng.integers(len(parquet)))]
            raw = bytearray(victim.read_bytes())
            if kind == "parquet_flip":
                for _ in range(int(rng.integers(1, 8))):
                    at = (
                        int(rng.integers(len(raw)))
                        if rng.random() < 0.5
                        else len(raw) - 1 - int(rng.integers(64))
                    )
                    raw[at] ^= 1 << int(rng.integers(8))
                victim.write_bytes(bytes(raw))
            elif kind == "parquet_cut":
                victim.write_bytes(bytes(raw[: int(rng.integers(len(raw)))]))
            elif kind == "parquet_swap":
                other = target / parquet[int(rng.integers(len(parquet)))]
                victim.write_bytes(other.read_bytes())
            else:
                victim.unlink()
        return target

    return make


# -- the worker ------------------------------------------------------------------------------------------


def _digests(path: Path) -> dict[str, str]:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


def _rss_kib(field_name: str) -> int:
    with open("/proc/self/status") as status:
        match = re.search(rf"^{field_name}:\s+(\d+)", status.read(), re.M)
    return int(match.group(1)) if match else 0


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def _on_alarm(signum: int, frame: object) -> None:
    raise CaseTimeout


@contextlib.contextmanager
def _timer(seconds: float) -> Iterator[None]:
    """CPU seconds (ITIMER_PROF), so that a loaded machine does not fail cases; hangs are the batch's timeout."""
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)


def _check_stderr(label: str, code: int, err: str, problems: list[str]) -> None:
    lines = [line for line in err.splitlines() if not line.startswith("popprof: warning: ")]
    if code not in (0, 1, 2):
        problems.append(f"{label}: exit {code}: {err.strip()[-400:]}")
    elif code == 2 and (len(lines) != 1 or not lines[0].startswith("popprof: error: ")):
        problems.append(f"{label}: exit 2 with {len(lines)} stderr lines: {err.strip()[-400:]}")
    if "Traceback" in err or "internal error" in err:
        problems.append(f"{label}: {err.strip()[-400:]}")


def run_case(case: Case, where: Path) -> Outcome:
    """Make the input, then run every reader and the CLI on it, checking the contract."""
    from popprof.cli import main
    from popprof.model.errors import PopprofError
    from popprof.model.profile import Profile
    from popprof.readers import read_with, reader_modules

    outcome = Outcome(case.name)
    where.mkdir(parents=True, exist_ok=True)
    path = case.make(where)
    before = _digests(path)
    outcome.input_bytes = sum(
        f.stat().st_size for f in ([path] if path.is_file() else path.rglob("*")) if f.is_file()
    )
    start_rss = _rss_kib("VmRSS")
    measured = _reset_peak()
    started = __import__("time").perf_counter()
    try:
        with _timer(CASE_SECONDS):
            for module in reader_modules():
                if module.FORMAT in ("pop", "pvti", "archive", "baseline"):
                    continue  # need the SDK / are popprof's own small JSON: exercised through detection
                try:
                    result = read_with(module, path)
                except PopprofError:
                    continue
                except (Exception, RecursionError) as exc:  # noqa: BLE001 - the contract under test
                    outcome.problems.append(
                        f"{module.FORMAT}.read raised {type(exc).__name__}: "
                        f"{' '.join(str(exc).split())[:300]}"
                    )
                    continue
                if not isinstance(result, Profile):
                    outcome.problems.append(f"{module.FORMAT}.read returned {type(result).__name__}")
            for args in (["summary", str(path)], ["check", str(path), "--fail-on", "error"]):
                err = io.StringIO()
                with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                    code = main(args)
                outcome.codes[args[0]] = code
                _check_stderr(args[0], code, err.getvalue(), outcome.problems)
    except CaseTimeout:
        outcome.problems.append(f"took more than {CASE_SECONDS:g} s of CPU")
    except MemoryError:
        outcome.problems.append("MemoryError (over the worker's address-space limit)")
    outcome.seconds = __import__("time").perf_counter() - started
    if _digests(path) != before:
        outcome.problems.append("the input was modified")
    if measured:
        outcome.peak_bytes = max(0, _rss_kib("VmHWM") - start_rss) * 1024
        if outcome.peak_bytes > 4 * outcome.input_bytes + ALLOWANCE:
            outcome.problems.append(
                f"peak memory {outcome.peak_bytes / 2**20:.0f} MiB over 4 x "
                f"{outcome.input_bytes:,} B + {ALLOWANCE >> 20} MiB"
            )
    shutil.rmtree(where, ignore_errors=True)
    return outcome


def _worker(cases: list[Case], where: str, progress_file: str, results) -> None:
    inherited = _rss_kib("VmSize") * 1024  # a fixed cap failed cases at once in a full-suite run
    limit = max(WORKER_MEMORY, inherited + WORKER_MEMORY - (640 << 20))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.signal(signal.SIGPROF, _on_alarm)
    outcomes = []
    for index, case in enumerate(cases):
        Path(progress_file).write_text(case.name)
        try:
            outcomes.append(run_case(case, Path(where) / str(index)))
        except BaseException as exc:  # noqa: BLE001 - report, never lose the batch
            outcomes.append(
                Outcome(case.name, [f"harness: {type(exc).__name__}: {exc}", traceback.format_exc()[-800:]])
            )
    results.send(outcomes)
    results.close()


def run_batch(cases: list[Case], where: Path, seconds: float) -> list[Outcome]:
    """Run ``cases`` in one forked worker; a worker that dies or overruns ``seconds`` is a failure of its case."""
    import popprof.cli  # noqa: F401 - import before forking: every case then runs without import time
    import popprof.readers

    list(popprof.readers.reader_modules())  # imports every reader (it imports each only when iterated)
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    progress_file = where / "current-case"
    worker = context.Process(target=_worker, args=(cases, str(where / "cases"), str(progress_file), send))
    worker.start()
    send.close()
    outcomes = None
    if receive.poll(seconds):
        with contextlib.suppress(EOFError):
            outcomes = receive.recv()
    worker.join(5)
    if worker.is_alive():
        worker.kill()
        worker.join()
    if outcomes is None:
        current = progress_file.read_text() if progress_file.exists() else "?"
        return [
            Outcome(
                current,
                [
                    f"worker ended without results (exit {worker.exitcode}) while running this "
                    f"case, or the batch overran {seconds:g} s"
                ],
            )
        ]
    return outcomes
