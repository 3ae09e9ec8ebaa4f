"""`--json` of a command that also says its progress: one JSON document on stdout, everything
else (its own lines and those of the processes it starts: the deploy's, ssh's) on stderr."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Within: file descriptor 1 is stderr's, for this process and every child it starts (a
    child inherits the descriptor, not Python's sys.stdout); after: stdout again."""
    sys.stdout.flush()
    kept = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(kept, 1)
        os.close(kept)
