"""Long waits say what they wait for: a line every few seconds with the time so far."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pyinfra import logger

EVERY_SECONDS = 15.0


@contextmanager
def waiting(host: Any, what: str, every: float = EVERY_SECONDS) -> Iterator[None]:
    """Log `waiting for WHAT: N s so far` every `every` seconds until the block ends.

    pyinfra's CLI patches threads into gevent greenlets, so this ticks while SSH waits.
    """
    stop = threading.Event()
    start = time.monotonic()

    def tick() -> None:
        while not stop.wait(every):
            elapsed = time.monotonic() - start
            logger.info(f"{host.print_prefix}waiting for {what}: {elapsed:.0f} s so far")

    logger.info(f"{host.print_prefix}waiting for {what}")
    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        yield
    finally:
        stop.set()
