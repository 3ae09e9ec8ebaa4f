"""Waits that end on their event: each asks for what it waits for (a unit's state, a port, a
journal line, an HTTP status) every POLL seconds and returns as soon as it is there, up to a
bound the caller names after the real program's timeout it stands for."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
POLL = 0.25  # an ssh through the node's shared connection costs about 0.01 s of it


def until(what: Callable[[], T], bound: float, failing: str | Callable[[], str]) -> tuple[T, float]:
    """`what()`'s first true answer and the seconds it took; after `bound` seconds an
    AssertionError with `failing` (or what `failing()` says then)."""
    started = time.monotonic()
    while True:
        found = what()
        waited = time.monotonic() - started
        if found:
            return found, waited
        if waited >= bound:
            message = failing if isinstance(failing, str) else failing()
            raise AssertionError(f"not within {bound:g} s: {message}")
        time.sleep(POLL)
