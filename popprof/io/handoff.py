"""Large results of a worker process handed to the reading process through a file in memory, not a pipe.

A process pool sends a job's result back pickled through a pipe: the worker copies its arrays into the
pickle, then into the pipe 64 kB at a time, waiting each time until a thread of the reading process (which
needs the GIL, held by the parse there) has taken them out, and the reading process copies them twice more.
For the first piece of an 83 MB trace (8 MB of columns) that kept the worker 25 ms from its next piece.

Here the worker writes the result once into a file of a folder in RAM (``/dev/shm`` where there is one),
pickled with protocol 5 with every buffer (numpy and Arrow) out of band, and the pool carries only a
:class:`Parcel`: the file's name and the size of each buffer in it. The reading process reads each buffer
straight into a block of its own, rebuilds the arrays over them without copying, and removes the file. The
folder is made by the reading process before the worker starts and removed by it afterwards, so a worker
that dies leaves nothing behind. Anything that goes wrong on the way (a full or missing folder) sends the
result through the pipe as before.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: where the folder goes when the system has a RAM file system there (Linux)
RAM_FOLDER = Path("/dev/shm")


@dataclass(frozen=True)
class Parcel:
    """A result written by :func:`put`: its file and the sizes of the pickle and of each buffer after it."""

    path: str
    sizes: tuple[int, ...]


def make_folder() -> Path | None:
    """A new private folder for parcels (in RAM where possible), or ``None`` when none can be made."""
    base = RAM_FOLDER if RAM_FOLDER.is_dir() and os.access(RAM_FOLDER, os.W_OK) else None
    try:
        return Path(tempfile.mkdtemp(prefix="popprof-", dir=base))
    except OSError:
        return None


def remove_folder(folder: Path | None) -> None:
    """Remove a folder of :func:`make_folder` and any parcel left in it."""
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def put(result: object, folder: Path | None, name: str) -> object:
    """``result`` as a :class:`Parcel` in ``folder`` (in a worker); ``result`` itself when it cannot be written."""
    if folder is None:
        return result
    buffers: list[pickle.PickleBuffer] = []
    head = pickle.dumps(result, protocol=5, buffer_callback=buffers.append)
    views = [buffer.raw() for buffer in buffers]
    path = folder / name
    try:
        with open(path, "wb") as handle:
            handle.write(head)
            for view in views:
                handle.write(view)
    except OSError:
        with contextlib.suppress(OSError):
            path.unlink()
        return result
    return Parcel(str(path), (len(head), *(view.nbytes for view in views)))


def take(parcel: object) -> object:
    """The result a :func:`put` wrote (its file removed), or ``parcel`` itself when it is not a :class:`Parcel`.

    Each buffer is read into a writable block of its own (the arrays rebuilt over them may be changed in
    place, and one that outlives the others, such as a deferred table's, keeps only its own memory)."""
    if not isinstance(parcel, Parcel):
        return parcel
    blocks = [bytearray(size) for size in parcel.sizes]
    try:
        with open(parcel.path, "rb", buffering=0) as handle:
            for block in blocks:
                view, got = memoryview(block), 0
                while got < len(block):  # a read may return less than asked (a signal, a very large block)
                    n = handle.readinto(view[got:])
                    if not n:
                        raise OSError(f"{parcel.path}: shorter than written")
                    got += n
    finally:
        with contextlib.suppress(OSError):
            os.unlink(parcel.path)
    return pickle.loads(blocks[0], buffers=blocks[1:])
