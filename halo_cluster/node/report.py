"""What the deploy tells drift and the plan tests in structure, not in log lines.

Two kinds of event per node: `refused` (the safety checks stopped it; the reason) and `diff` (a
file the run changes or would change; its unified diff). They are kept per run in memory and,
when $HALO_REPORT names a file, appended to it as JSON lines (drift reads that file).
"""

from __future__ import annotations

import json
import os
import weakref
from typing import Any

from pyinfra import logger
from pyinfra.context import ctx_state

REPORT_ENV = "HALO_REPORT"
_EVENTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def record(host: Any, kind: str, **fields: Any) -> None:
    event = {"node": host.data.get("halo_node") or host.name, "kind": kind, **fields}
    _EVENTS.setdefault(ctx_state.get(), []).append(event)
    target = os.environ.get(REPORT_ENV)
    if target:
        with open(target, "a") as out:
            out.write(json.dumps(event) + "\n")


def events(state: Any, kind: str) -> list[dict]:
    return [e for e in _EVENTS.get(state, []) if e["kind"] == kind]


def refuse(host: Any, reason: str) -> None:
    """Stop this node before anything on it changed: one line, and the run exits 1.

    The host is taken out of the run directly rather than through `state.fail_hosts`, which
    aborts the whole run when no host is left: every refused node must still print its reason.
    """
    logger.error(f"{host.print_prefix}refused: {reason}")
    record(host, "refused", reason=reason)
    state = ctx_state.get()
    state.failed_hosts.add(host)
    state.active_hosts.discard(host)


def fail(host: Any, reason: str) -> None:
    """Fail this node but let it run on: one line, the `refused` event, and the run exits 1.

    Unlike `refuse`, the host stays in the run: what it planned before still happens (the serve
    role writes its files and runs Ray, and withholds only vLLM's start)."""
    logger.error(f"{host.print_prefix}refused: {reason}")
    record(host, "refused", reason=reason)
    ctx_state.get().failed_hosts.add(host)
