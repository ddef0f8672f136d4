"""XPlane profiles (``*.xplane.pb``: the ``XSpace`` protobuf that ``jax.profiler``, TensorFlow and xprof write)
into event tables, as a GPU trace.

- a GPU plane (``/device:GPU:N``, CUDA or ROCm) is device ``gpu:N``: each of its ``Stream #N(...)`` lines is a
  stream (``pid`` N, ``tid`` and ``stream`` the line's id), its events kernels, copies (``memcpy_details``) or
  memsets (``memset_details``) on Kineto's channels (``kernel``, ``gpu_memcpy``, ``gpu_memset``);
- the lines a profiler derives on a GPU plane (``XLA Modules``, ``XLA Ops``, ``Framework Ops``, ``Steps``, ...)
  summarise the stream lines' work: they are left out (counted in ``xplane.skipped_lines``), so busy time is
  not counted twice;
- a TPU plane (``/device:TPU:N``) is device ``tpu:N``: its ``XLA Ops`` line (the core's HLO ops, one after
  another) is its one stream (``pid`` 10000 + N); ops whose ``hlo_category`` is a copy (``copy-start``,
  ``copy-done``) are copies, named ``Memcpy HtoD (<op>)`` / ``Memcpy DtoH (<op>)`` when one end is in host
  memory; its other lines (``XLA Modules``, ``Async XLA Ops``, ``XLA TraceMe``) are left out
  like a GPU's derived lines;
- the host plane (``/host:CPU``): its lines are threads of one process, events runtime calls
  (``cuda_runtime``: they carry a ``correlation_id``), Python frames (``python_function``) or other TraceMe
  annotations (``trace_me``);
- times: line ``timestamp_ns`` + event ``offset_ps``, in microseconds as written (JAX writes them from the
  profile's start, which ``xplane.profile_start_time_ns`` records), durations from ``duration_ps``;
  ``correlation_id`` is ``events.correlation``; with ``with_args`` every stat of an event is its ``args``.

Other planes (``/host:metadata``, ``Task Environment``) give metadata only. The protobuf messages are
built at run time (:mod:`.proto`, from ``xplane.proto`` of tensorflow/tensorflow
``third_party/xla/third_party/tsl/tsl/profiler/protobuf/xplane.proto`` at commit
``6ee576304d65b94f7b645286fbd4df96a279f7fc``), with the optional ``protobuf`` library
(``pip install 'popprof[xplane]'``). Modules: :mod:`.proto` the messages, :mod:`.planes` one plane's lines into
columns, :mod:`.reading` the Profile. See ``docs/readers.md``.
"""

from __future__ import annotations

from pathlib import Path

FORMAT = "xplane"
SUFFIX = ".xplane.pb"

__all__ = ["FORMAT", "SUFFIX", "candidates", "in_directory", "plugins_profile", "read", "sniff"]


def candidates(path: Path) -> list[Path]:
    """The XPlane files a directory holds: ``*.xplane.pb`` in it, else in ``plugins/profile/<run>/`` (the layout
    TensorBoard and ``jax.profiler.trace`` write), in name order."""
    return in_directory(path) or plugins_profile(path)


def in_directory(path: Path) -> list[Path]:
    """The XPlane files directly in ``path`` (a ``plugins/profile/<run>/`` directory), in name order."""
    return _files(path, f"*{SUFFIX}")


def plugins_profile(path: Path) -> list[Path]:
    """The XPlane files in ``path/plugins/profile/<run>/`` (a TensorBoard log directory), in name order."""
    return _files(path, f"plugins/profile/*/*{SUFFIX}")


def _files(path: Path, pattern: str) -> list[Path]:
    try:
        return sorted(p for p in path.glob(pattern) if p.is_file())
    except OSError:
        return []


def sniff(path: Path, head: bytes) -> bool:
    """A file named ``*.xplane.pb``, or a directory that holds one (directly or in ``plugins/profile/<run>/``)."""
    if path.is_dir():
        return bool(candidates(path))
    return path.name.endswith(SUFFIX)


def read(path: Path, **options: object):  # noqa: ANN201 - the Profile, imported with pandas when reading
    """Read an XPlane file (or the one a directory holds) into a Profile (see :func:`.reading.read`)."""
    from .reading import read as read_file

    return read_file(path, **options)
