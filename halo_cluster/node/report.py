"""What the deploy tells drift and the plan tests in structure, not in log lines.

Two kinds of event per node: `refused` (the safety checks stopped it; the reason) and `diff` (a
file the run changes or would change; its unified diff); beside them the deploy's `reached` and
`planned`, the serve role's `image-mismatch` and the container role's `skopeo-pending` (a refusal
a second run lifts). They are kept per run in memory and,
when $HALO_REPORT names a file, appended to it as JSON lines (drift reads that file).

A run of the pyinfra CLI with a refused node ends with one line naming every refused node and
the exit code docs/ci.md gives (`end_line`), after pyinfra's own output.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import sys
import weakref
from typing import Any

from pyinfra import logger

from halo_cluster.node.pyinfra_internals import (
    cli_running,
    mark_failed,
    real_host,
    run,
    take_out,
)

REPORT_ENV = "HALO_REPORT"
# a node refused only because the head had no skopeo when the run read it (the packages role
# installs it in that run): `halo-cluster deploy` runs once more when every refusal is this one
SKOPEO_PENDING = "skopeo-pending"
REFUSED_EXIT = 1  # docs/ci.md: pyinfra's exit code with a failed host
_EVENTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_ENDING: weakref.WeakSet = weakref.WeakSet()  # runs whose end line is registered


def record(host: Any, kind: str, **fields: Any) -> None:
    event = {"node": host.data.get("halo_node") or host.name, "kind": kind, **fields}
    _EVENTS.setdefault(run(), []).append(event)
    target = os.environ.get(REPORT_ENV)
    if target:
        with open(target, "a") as out:
            out.write(json.dumps(event) + "\n")


def events(state: Any, kind: str) -> list[dict]:
    return [e for e in _EVENTS.get(state, []) if e["kind"] == kind]


def read_events(path: str, start: int = 0) -> list[dict]:
    """The events a run appended to the report file at `path` from byte `start` on."""
    try:
        with open(path, encoding="utf-8") as found:
            found.seek(start)
            lines = found.read().splitlines()
    except FileNotFoundError:
        return []
    events = []
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:
            continue  # a line torn by a killed run: the others still say what happened
    return events


def only_skopeo_pending(events: list[dict]) -> bool:
    """Whether a run's refusals are all the head's missing skopeo, each with its own
    `SKOPEO_PENDING` event: then the same deploy, run again, resolves the image."""
    refused = {(e.get("node"), e.get("reason")) for e in events if e.get("kind") == "refused"}
    pending = {(e.get("node"), e.get("reason")) for e in events if e.get("kind") == SKOPEO_PENDING}
    return bool(refused) and refused <= pending


def refuse(host: Any, reason: str) -> None:
    """Stop this node before anything on it changed: one line, and the run exits 1.

    The host is taken out of the run directly rather than through `state.fail_hosts`, which
    aborts the whole run when no host is left: every refused node must still print its reason.
    """
    host = real_host(host)  # a proxy in pyinfra's failed hosts outlives its run
    logger.error(f"{host.print_prefix}refused: {reason}")
    record(host, "refused", reason=reason)
    take_out(host)
    _end_with_refusals(run())


def fail(host: Any, reason: str) -> None:
    """Fail this node but let it run on: one line, the `refused` event, and the run exits 1.

    Unlike `refuse`, the host stays in the run: what it planned before still happens (the serve
    role writes its files and runs Ray, and withholds only vLLM's start)."""
    host = real_host(host)
    logger.error(f"{host.print_prefix}refused: {reason}")
    record(host, "refused", reason=reason)
    mark_failed(host)
    _end_with_refusals(run())


def end_line(refused: list[dict]) -> str | None:
    """The run's last line from its `refused` events: every refused node (each one's reason is
    its own line above) and the exit code; None when no node was refused."""
    # by name, digits as numbers: nodes are refused at once, in no order a reader could use
    nodes = sorted({e["node"] for e in refused}, key=_natural)
    if not nodes:
        return None
    return (
        f"halo-cluster: refused {len(nodes)} node{'s' if len(nodes) > 1 else ''} "
        f"({', '.join(nodes)}), each for the reason on its own line above: "
        f"exit {REFUSED_EXIT} (halo-cluster deploy --help)"
    )


def _natural(name: str) -> list[tuple[int, str]]:
    return [(int(part), "") if part.isdigit() else (0, part) for part in re.split(r"(\d+)", name)]


def _end_with_refusals(state: Any) -> None:
    """Print `end_line` when the pyinfra CLI exits, after its own output (once per run; not
    when the plan tests prepare a deploy in their own process)."""
    if not cli_running() or state in _ENDING:
        return
    _ENDING.add(state)
    ref = weakref.ref(state)

    def at_exit() -> None:
        line = end_line(events(ref(), "refused")) if ref() is not None else None
        if line:
            print(line, file=sys.stderr)

    atexit.register(at_exit)
