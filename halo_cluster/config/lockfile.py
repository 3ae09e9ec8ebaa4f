"""The lock's file as every writer holds and replaces it (config/lock.py): one writer at a time,
by `flock` on a sibling file, and the new text put in place by a rename, so that a reader sees
the old lock or the new one, never a torn one, and two writers at once never lose a record."""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def guard(path: Path) -> Path:
    """The file every writer of the lock at `path` holds: a sibling, since the lock itself is
    replaced by a rename (a flock on it would be on the file just replaced)."""
    return path.with_name(f".{path.name}.flock")


@contextmanager
def held(path: Path) -> Iterator[None]:
    """The lock at `path` held for this writer alone (an exclusive `flock`; it waits for the
    other's), released when the block ends or the process does. The block must not yield: under
    pyinfra's gevent a greenlet waiting in flock blocks every other greenlet of its process,
    the holder too (tests/unit/test_lock_writers.py)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(guard(path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # the flock goes with it


def replace(path: Path, text: str) -> None:
    """`text` written to `path` atomically: a temporary file in the same folder, synced, then
    renamed over it (0644)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, partial = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(partial, 0o644)
        os.replace(partial, path)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
