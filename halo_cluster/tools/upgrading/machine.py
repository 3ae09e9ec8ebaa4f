"""What both upgrades share: the exit codes (commands/exits.py, docs/ci.md's table), `Stop`,
the head's history line, the deploy's command line, the completion's judgement, and `Reach`,
the cluster as both sets of phases reach it (`nodes.Nodes` on a real one, a fake one in
tests/unit/helpers_upgrade.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Protocol

from halo_cluster.config import lock as locks
from halo_cluster.config.model import Node
from halo_cluster.config.quoting import quote
from halo_cluster.tools import project, selection, transport
from halo_cluster.tools.commands.exits import ABORTED, NOT_SERVING, OK, ROLLED_BACK
from halo_cluster.tools.commands.exits import ERROR as REFUSED

__all__ = ["ABORTED", "NOT_SERVING", "OK", "REFUSED", "ROLLED_BACK"]

STEP_SECONDS = 1800.0  # a step's bound on a node by default: a dnf install, a dracut
PROMPT = "The capital of France is"


class Stop(Exception):
    """The upgrade ends here with this exit code and line (REFUSED: nothing was changed)."""

    def __init__(self, code: int, line: str) -> None:
        super().__init__(line)
        self.code = code
        self.line = line


class Reach(Protocol):
    """The cluster as both upgrades reach it; no method raises, each says what failed."""

    def run(
        self, node: Node, what: str, script: str, timeout: float = STEP_SECONDS
    ) -> transport.Result: ...  # `what` names the step (the fake cluster answers by it)
    def append(self, line: str) -> None: ...  # one line of the head's history
    def deploy(
        self, data: Sequence[str] = (), limit: Sequence[str] = ()
    ) -> int: ...  # the deploy with these `--data` values on the `limit` nodes (all): its exit
    def completion(self) -> str | None: ...  # why one completion failed, or None
    def serving(self) -> bool: ...  # /health answered 200 within serve.ready_timeout
    def rejoin(self) -> str | None: ...  # native: every rank restarted after a reboot; why not


def record(reach: Reach, event: str, **fields: object) -> None:
    """One line of the head's history (config/lock.py's format): every upgrade line goes here."""
    reach.append(locks.history_line(event, **fields))


COMMON = ("v", "time", "event", "run", "by", "node")  # history_line's own fields, and the node's
SHOWN = 80  # characters of a step's field in `left_on`'s lines


def left_on(names: Sequence[str], recorded: Sequence[str]) -> list[str]:
    """For each node of NAMES, the last step of RECORDED (this run's history lines, `record`'s)
    that concerns it, its own or every node's: what an interrupted upgrade left there."""
    steps = [json.loads(line) for line in recorded]
    lines = []
    for name in names:
        mine = [step for step in steps if step.get("node", name) == name]
        if not mine:
            lines.append(f"  {name}: no step recorded by this run")
            continue
        shown = [
            f"{key} {value if isinstance(value, str) else json.dumps(value)}"[:SHOWN]
            for key, value in mine[-1].items()
            if key not in COMMON
        ]
        lines.append(f"  {name}: {mine[-1]['event']}" + (f" ({', '.join(shown)})" if shown else ""))
    return lines


def deploy_argv(data: Sequence[str] = (), limit: Sequence[str] = ()) -> list[str]:
    """The deploy as the upgrades run it: without asking, each of `data` a `--data` value,
    limited to the nodes of `limit` (all when empty)."""
    options = [arg for value in data for arg in ("--data", value)]
    options += [arg for name in limit for arg in ("--limit", selection.pyinfra_name(name))]
    return [*project.PYINFRA, "-y", *options, "inventory.py", "deploy.py"]


def completion_problem(result: transport.Result, model: str) -> str | None:
    """What is wrong with the completion curl printed (its body, then the HTTP status)."""
    if result.code != 0:
        return f"no answer ({result.error or f'curl exit {result.code}'})"
    body, _, status = result.out.rstrip("\n").rpartition("\n")
    if status != "200":
        return f"HTTP {status or 'none'}: {body.strip()[:200]}"
    try:
        answer = json.loads(body)
        text = answer["choices"][0]["text"]
    except (ValueError, KeyError, IndexError, TypeError):
        return f"not a completion: {body.strip()[:200]}"
    if not str(text).strip():
        return "an empty completion"
    if answer.get("model") != model:
        return f"answered by {quote(answer.get('model'))}, not {model}"
    return None


def last_error(result: transport.Result) -> str:
    """A failed step's one line: the node's last error line, or its exit code."""
    return result.error or f"exit {result.code}"
