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
    """One fuzz input: a file or bundle directory written by ``make`` into a directory.

    ``config``: a ``popprof.toml`` passed with ``--config`` (hostile configs). ``changing``: a thread
    rewrites the input while it is read (the input is then expected to change).
    """

    name: str
    make: Callable[[Path], Path]
    config: str | None = None
    changing: bool = False


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
        "config": [FIXTURES / "traces/training_loop.json.gz", FIXTURES / "mk2_training.popprof"],
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
            "member_symlink",
            "member_special",
            "manifest_sparse",
            "parquet_sparse",
            "parquet_row_bomb",
            "foreign_manifest",
        ][int(rng.integers(13))]
        cases.append(
            Case(
                f"{path.name}#{i}:{kind}",
                _tampered(path, kind, manifest, parquet, int(rng.integers(1 << 30))),
            )
        )
    for kind in _MEMBER_KINDS:  # each kind of hostile member at least once per seed
        cases.append(
            Case(f"{path.name}:{kind}", _tampered(path, kind, manifest, parquet, int(rng.integers(1 << 30))))
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
        if kind in _MEMBER_KINDS:
            _MEMBER_KINDS[kind](target, parquet[int(rng.integers(len(parquet)))], where)
        elif kind in ("manifest_field", "table_field"):
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


def _member_symlink(bundle: Path, member: str, where: Path) -> None:
    """A table file that is a symlink to a file outside the bundle (it must never be followed)."""
    outside = where / "outside.parquet"
    shutil.copy(bundle / member, outside)
    (bundle / member).unlink()
    (bundle / member).symlink_to(outside)


def _member_special(bundle: Path, member: str, where: Path) -> None:
    """A table file that is a FIFO (reading it would block forever)."""
    (bundle / member).unlink()
    os.mkfifo(bundle / member)


def _manifest_sparse(bundle: Path, member: str, where: Path) -> None:
    """A sparse manifest of 1.5 GB (must be refused by its size, never read whole)."""
    with open(bundle / "manifest.json", "r+b") as handle:
        handle.truncate(1500 << 20)


def _parquet_sparse(bundle: Path, member: str, where: Path) -> None:
    """A table file grown to a sparse 1.5 GB (its footer zeros): refused from its last bytes, never read whole."""
    with open(bundle / member, "r+b") as handle:
        handle.truncate(1500 << 20)


def _parquet_row_bomb(bundle: Path, member: str, where: Path) -> None:
    """A table of 40 M zero rows in a few MB, the manifest agreeing (refused from the footer)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pq.read_schema(bundle / member)
    block = pa.table({f.name: pa.nulls(1 << 20, f.type) for f in schema}, schema=schema)
    with pq.ParquetWriter(bundle / member, schema, compression="zstd") as writer:
        for _ in range(40):
            writer.write_table(block)
    manifest = json.loads((bundle / "manifest.json").read_text())
    for entry in manifest["tables"].values():
        if entry.get("file") == member:
            entry["rows"] = 40 << 20
    (bundle / "manifest.json").write_text(json.dumps(manifest))


def _foreign_manifest(bundle: Path, member: str, where: Path) -> None:
    """Another program's manifest.json (a browser extension's): not a popprof bundle."""
    (bundle / "manifest.json").write_text(json.dumps({"manifest_version": 3, "name": "extension"}))


_MEMBER_KINDS: dict[str, Callable[[Path, str, Path], None]] = {
    "member_symlink": _member_symlink,
    "member_special": _member_special,
    "manifest_sparse": _manifest_sparse,
    "parquet_sparse": _parquet_sparse,
    "parquet_row_bomb": _parquet_row_bomb,
    "foreign_manifest": _foreign_manifest,
}


# -- hostile configs, option files that are special files, inputs changing while read ----------------------

#: Configs that must each be one line, exit 2 (wrong types, non-finite numbers, catastrophic regexes,
#: option files that are special files).
HOSTILE_CONFIGS = (
    "[rules]\nenable = [1]\n",
    "[rules]\ndisable = {a = 1}\n",
    "[rules]\nfail_on = 2\n",
    '[rules]\n"memory.headroom.warning" = nan\n',
    "[device_map]\ncompute = 5\n",
    '[device_map]\ncompute = "(a+)+$"\n',
    '[device_map]\nsync = "(x|xy)*z"\n',
    # a shape the check misses, with lookahead, which the linear-time engine (RE2) does not run
    '[device_map]\ncompute = "(?=a)' + "a?" * 30 + "a" * 30 + '"\n',
    'device_map = "/dev/zero"\n',
    'device_map = "{fifo}"\n',
    "[gate]\nstrict = 1\n",
    "rules = 5\n",
)


def config_cases(seed: Path) -> list[Case]:
    """The seed read under each hostile config (``--config``), and once while it is being rewritten."""
    if seed.is_dir():

        def make(where: Path) -> Path:
            return Path(shutil.copytree(seed, where / seed.name))

        return [Case(f"{seed.name}:config{i}", make, config=text) for i, text in enumerate(HOSTILE_CONFIGS)]
    data, was_gzip = raw_bytes(seed)
    suffix = "".join(seed.suffixes[-2:]) if was_gzip else seed.suffix
    cases = [
        Case(f"{seed.name}:config{i}", _writer(data, False, suffix), config=text)
        for i, text in enumerate(HOSTILE_CONFIGS)
    ]
    cases.append(
        Case(f"{seed.name}:changing", _writer(data, False, suffix.removesuffix(".gz")), changing=True)
    )
    return cases


@contextlib.contextmanager
def _rewriting(path: Path) -> Iterator[None]:
    """Rewrite ``path`` in place (truncate, then write it back in pieces) again and again while the block runs."""
    import threading

    original = path.read_bytes()
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            with open(path, "r+b") as handle:
                handle.truncate(len(original) // 3)
                handle.seek(0, 2)
                for start in range(len(original) // 3, len(original), 1 << 16):
                    handle.write(original[start : start + (1 << 16)])
                    if stop.wait(0.0005):
                        break

    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


# -- the worker ------------------------------------------------------------------------------------------


def _digests(path: Path) -> dict[str, str]:
    """Each input file's SHA-256, streamed (a sparse 1.5 GB member read whole would exceed the worker's own
    address-space limit: the harness, not popprof, would fail the case)."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    digests = {}
    for f in files:
        with open(f, "rb") as handle:
            digests[str(f)] = hashlib.file_digest(handle, "sha256").hexdigest()
    return digests


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
    extra: list[str] = []
    if case.config is not None:
        fifo = where / "map.fifo"
        os.mkfifo(fifo)
        (where / "popprof.toml").write_text(case.config.replace("{fifo}", str(fifo)))
        extra = ["--config", str(where / "popprof.toml")]
    before = _digests(path)
    outcome.input_bytes = sum(
        f.stat().st_size for f in ([path] if path.is_file() else path.rglob("*")) if f.is_file()
    )
    start_rss = _rss_kib("VmRSS")
    measured = _reset_peak()
    started = __import__("time").perf_counter()
    try:
        with _timer(CASE_SECONDS), _rewriting(path) if case.changing else contextlib.nullcontext():
            for module in reader_modules():
                if module.FORMAT in ("pop", "pvti", "baseline"):
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
            for args in (["summary", str(path), *extra], ["check", str(path), "--fail-on", "error", *extra]):
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
    if case.config is not None and any(code != 2 for code in outcome.codes.values()):
        outcome.problems.append(f"a hostile config was not refused (exit {outcome.codes})")
    if not case.changing and _digests(path) != before:
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


def _worker(cases: list[Case], where: str, first: int, results) -> None:
    inherited = _rss_kib("VmSize") * 1024  # a fixed cap failed cases at once in a full-suite run
    limit = max(WORKER_MEMORY, inherited + WORKER_MEMORY - (640 << 20))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.signal(signal.SIGPROF, _on_alarm)
    for index in range(first, len(cases)):
        case = cases[index]
        results.send(("start", index))
        try:
            outcome = run_case(case, Path(where) / str(index))
        except BaseException as exc:  # noqa: BLE001 - report, never lose the batch
            outcome = Outcome(
                case.name, [f"harness: {type(exc).__name__}: {exc}", traceback.format_exc()[-800:]]
            )
        results.send(("done", outcome))  # each case as it ends: a worker that dies loses only its case
    results.close()


#: A case is hung when it has run this long (wall) while its worker used less than :data:`HUNG_CPU` of CPU:
#: blocked, not computing (a computing case is stopped by its own CPU timer, :data:`CASE_SECONDS`).
HUNG_WALL = 90.0
HUNG_CPU = 2.0


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` and its waited-for children (``/proc/PID/stat``), in seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def run_batch(cases: list[Case], where: Path, seconds: float) -> list[Outcome]:
    """Run ``cases`` in a forked worker; a case that kills its worker or hangs is a failure of that case.

    Outcomes come back one case at a time, so a worker that dies (the kernel's OOM killer, a crash) or
    is stopped loses only the case it was running: the failure names that case and how the worker
    ended, and a new worker goes on with the next case. Time is bounded per case, independently of
    the machine's load: each case has :data:`CASE_SECONDS` of CPU (its own timer), and a case that
    runs :data:`HUNG_WALL` seconds while using less than :data:`HUNG_CPU` of CPU is hung. ``seconds``
    bounds the CPU the whole batch may use (a loaded machine stretches wall time, not CPU time).
    """
    import time

    import popprof.cli  # noqa: F401 - import before forking: every case then runs without import time
    import popprof.readers

    list(popprof.readers.reader_modules())  # imports every reader (it imports each only when iterated)
    context = multiprocessing.get_context("fork")
    outcomes: list[Outcome] = []
    used_cpu = 0.0  # CPU of the workers that have ended
    next_case = 0
    while next_case < len(cases):
        receive, send = context.Pipe(duplex=False)
        worker = context.Process(target=_worker, args=(cases, str(where / "cases"), next_case, send))
        worker.start()
        send.close()
        current, started, problem = None, time.monotonic(), None
        cpu = cpu_at_start = _cpu_seconds(worker.pid)
        while True:
            try:
                ready = receive.poll(1.0)
                message = receive.recv() if ready else None
            except EOFError:
                break  # the worker ended (normally, after the last case, or killed)
            cpu = _cpu_seconds(worker.pid)
            if message is not None:
                kind, value = message
                if kind == "start":
                    current, started, cpu_at_start = value, time.monotonic(), cpu
                else:
                    outcomes.append(value)
                    next_case = current + 1
                    current = None
                continue
            if current is None:
                continue
            wall, case_cpu = time.monotonic() - started, cpu - cpu_at_start
            if wall > HUNG_WALL and case_cpu < HUNG_CPU:
                problem = f"hung: {wall:.0f} s with {case_cpu:.1f} s of CPU"
            elif case_cpu > CASE_SECONDS + 30:
                problem = f"its CPU timer did not stop it ({case_cpu:.0f} s of CPU)"
            elif used_cpu + cpu > seconds:
                problem = f"the batch used more than {seconds:g} s of CPU"
            if problem:
                worker.kill()
                break
        worker.join(30)
        if worker.is_alive():
            worker.kill()
            worker.join()
        used_cpu += cpu  # the last reading before it ended
        if current is not None:  # the worker ended inside a case
            how = problem or (
                "killed by SIGKILL (the kernel's out-of-memory killer?)"
                if worker.exitcode == -signal.SIGKILL
                else f"the worker ended with exit {worker.exitcode}"
            )
            outcomes.append(Outcome(cases[current].name, [f"{how} while running this case"]))
            next_case = current + 1
        elif next_case < len(cases) and worker.exitcode != 0:
            outcomes.append(Outcome(cases[next_case].name, [f"the worker ended with exit {worker.exitcode}"]))
            next_case += 1
        if problem and "batch" in problem:
            outcomes += [Outcome(c.name, ["not run: " + problem]) for c in cases[next_case:]]
            break
    return outcomes
