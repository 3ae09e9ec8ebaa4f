"""Plan the deploy against pyinfra's @fake connector and return what it would do, per node.

A fake node answers by fact: {Fact: answer} answers that fact whatever its arguments, {given(Fact,
**kwargs): answer} those arguments only; an answer is the fact's output lines (recorded on real
hosts: tests/plan/fixtures, copied from shared/reference/recorded), pyinfra's fake response dict
({"stdout": lines, "success": False}), or a function of the fact's arguments returning either.
The harness turns them into the @fake connector's `fake_responses` (its documented data), each
keyed by the exact command: the deploy's one read per node (`reads.NodeReads`, built from what
the deploy and the roles declare, as deploy.py does) and each fact's own command (a read nobody
declared, or one read again). Any other command fails, and `plan` raises `UnansweredRead`
naming it: a fact no node answers cannot be answered by another's output. Nothing runs
anywhere: operations are prepared and their command generators read, so file uploads can be
inspected as text.
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyinfra
from pyinfra.api import Config, FactBase, Inventory, State
from pyinfra.api.command import FileUploadCommand, FunctionCommand, StringCommand
from pyinfra.api.connect import connect_all
from pyinfra.api.state import StateStage
from pyinfra.context import ctx_host, ctx_state
from pyinfra.facts.server import TmpDir
from pyinfra_cli.util import load_deploy_file

from halo_cluster import roles
from halo_cluster.config.hostdata import inventory_groups
from halo_cluster.config.model import Cluster
from halo_cluster.node import batch, nodefiles, reads, report
from halo_cluster.node.deployreads import own_reads

ROOT = Path(__file__).resolve().parents[2]

Answer = list[str] | dict[str, Any]
Node = dict[Any, Answer | Callable[..., Answer]]

# what pyinfra itself reads while planning: an upload's temporary file asks for TmpDir (no
# TMPDIR on the node: pyinfra's default)
PYINFRA_READS: Node = {TmpDir: []}
NOT_ANSWERED = "the plan's fake node answers no such command"


class UnansweredRead(AssertionError):
    """The deploy ran a command no fact of the fake node answers."""


def given(fact: type[FactBase], **kwargs: Any) -> tuple:
    """The key of an answer to `fact` with these arguments only."""
    return (fact, tuple(sorted(kwargs.items())))


@dataclass
class PlannedOp:
    name: str
    commands: list[str] = field(default_factory=list)
    uploads: dict[str, str] = field(default_factory=dict)  # path -> text
    runs: bool = True  # its `_if` conditions, as the run evaluates them after every node planned
    # what it runs on the controller when the deploy runs (the lock, Ray's token): `run_on`
    functions: list[FunctionCommand] = field(default_factory=list)


@dataclass
class Plan:
    ops: dict[str, list[PlannedOp]]  # node name -> operations in order
    refused: dict[str, str] = field(default_factory=dict)  # node name -> reason
    # node name -> the commands the deploy ran on it while planning: its fact reads
    read: dict[str, list[str]] = field(default_factory=dict)
    log: str = ""
    mismatches: list[dict] = field(default_factory=list)  # `image-mismatch` events (drift's)
    order: list[str] = field(default_factory=list)  # every operation's name, in the run's order

    def names(self, node: str) -> list[str]:
        return [op.name for op in self.ops[node]]

    def commands(self, node: str) -> list[str]:
        return [c for op in self.ops[node] for c in op.commands]

    def uploads(self, node: str) -> dict[str, str]:
        return {p: t for op in self.ops[node] for p, t in op.uploads.items()}


def plan(cluster: Cluster, nodes: dict[str, Node]) -> Plan:
    """Prepare deploy.py for every node of `cluster` on the @fake connector, each node answering
    by fact (`nodes`: node name -> its answers)."""
    groups = inventory_groups(cluster)
    declared = _declared_reads(groups)
    responses = {name: fake_responses(name, nodes[name], declared[name]) for name in declared}
    answered = {name: list(found) for name, found in responses.items()}
    for found in responses.values():
        found[re.compile("")] = {"success": False, "stderr": [NOT_ANSWERED]}
    state = State(_inventory(groups, responses), Config())
    # order operations by their line in the deploy files, as the pyinfra CLI does
    pyinfra.is_cli = True
    state.current_op_file_number = 0
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with ctx_state.use(state):
            state.set_stage(StateStage.Connect)
            connect_all(state)
            state.set_stage(StateStage.Prepare)
            try:
                load_deploy_file(state, str(ROOT / "deploy.py"))
            finally:
                _all_answered(state, answered)
            refused = {e["node"]: e["reason"] for e in report.events(state, "refused")}
            read = {  # before _collect, whose uploads ask for a temporary directory
                h.name.removeprefix("@fake/"): list(h.connector.executed_commands)
                for h in state.inventory
            }
            mismatches = report.events(state, "image-mismatch")
            result = Plan(_collect(state), refused=refused, read=read, mismatches=mismatches)
            result.order = [_name(state, op_hash) for op_hash in state.get_op_order()]
            _all_answered(state, answered)
            return result
    finally:
        pyinfra.is_cli = False
        os.chdir(cwd)


def _inventory(groups: dict[str, list], responses: dict[str, dict]) -> Inventory:
    all_hosts, group_hosts = [], {}
    for group, hosts in groups.items():
        entries = [
            (
                f"@fake/{name}",
                dict(
                    data, fake_responses=responses.get(name, {}), fake_delay=0, fake_delay_jitter=0
                ),
            )
            for name, data in hosts
        ]
        all_hosts += entries
        group_hosts[group] = ([name for name, _ in entries], {})
    return Inventory((all_hosts, {}), **group_hosts)


def _declared_reads(groups: dict[str, list]) -> dict[str, list[reads.Read]]:
    """What deploy.py declares for each node (its own reads and the roles'), once each, in the
    order its one read runs them; in a run of its own, as the snapshot's paths are declared
    per run."""
    inventory = _inventory(groups, {})
    with ctx_state.use(State(inventory, Config())):
        nodefiles.declare(roles.declared_paths)
        return {host.name.removeprefix("@fake/"): _once(host.data) for host in inventory}


def _once(data: Any) -> list[reads.Read]:
    found: dict[tuple, reads.Read] = {}
    for fact, kwargs in (*own_reads(data), *roles.declared_reads(data)):
        key = (fact, tuple(sorted((k, repr(v)) for k, v in kwargs.items())))
        found.setdefault(key, (fact, kwargs))
    return list(found.values())


def fake_responses(name: str, node: Node, declared: list[reads.Read]) -> dict[re.Pattern, Answer]:
    """The @fake connector's responses of one node, each keyed by its exact command: the node's
    one read of what the deploy declares, each of its parts read alone, then every fact's own
    command."""
    node = {**PYINFRA_READS, **node}
    responses: dict[re.Pattern, Answer] = {}
    parts, results = [], []
    for fact, kwargs in declared:
        answer = _answer(node, fact, kwargs)
        if answer is None:
            raise UnansweredRead(f"{name}: the fake node answers no {_call(fact, kwargs)}")
        command = reads.part_command(fact, kwargs)
        if command is not None:
            parts.append(command)
            results.append(_result(answer))
            # a part that failed is read once more on its own (reads._read_alone)
            responses[_exactly(batch.script([command]))] = reads.join_output([_result(answer)])
    if parts:
        responses[_exactly(batch.script(parts))] = reads.join_output(results)
    for fact, kwargs in [*declared, *_alone(node)]:
        answer = _answer(node, fact, kwargs)
        if answer is not None:
            responses[_own_command(fact, kwargs)] = answer
    return responses


def _alone(node: Node) -> list[reads.Read]:
    """The reads a node answers beyond the declared ones: each given(...) key, and each fact
    answered by class whose command needs no argument."""
    found: list[reads.Read] = []
    for key in node:
        if isinstance(key, tuple):
            found.append((key[0], dict(key[1])))
        elif all(
            p.default is not p.empty for p in inspect.signature(key().command).parameters.values()
        ):
            found.append((key, {}))
    return found


def _answer(node: Node, fact: type, kwargs: dict[str, Any]) -> Answer | None:
    try:
        answer = node.get(given(fact, **kwargs), node.get(fact))
    except TypeError:  # an unhashable argument: only a by-class answer can answer it
        answer = node.get(fact)
    return answer(**kwargs) if callable(answer) else answer


def _result(answer: Answer) -> tuple[int, list[str]]:
    """(status, stdout lines) of an answer, as the node's one read prints each part's."""
    if isinstance(answer, dict):
        return (0 if answer.get("success", True) else 1), list(answer.get("stdout") or [])
    return 0, list(answer)


def _call(fact: type, kwargs: dict[str, Any]) -> str:
    return f"{fact.__name__}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"


def _exactly(command: str) -> re.Pattern:
    return re.compile(rf"\A{re.escape(command)}\Z")


def _own_command(fact: type, kwargs: dict[str, Any]) -> re.Pattern:
    """The command pyinfra runs for the fact alone: its own, behind pyinfra's guard when it
    requires a command (the guard's sentinel is pyinfra's, matched as any word)."""
    instance = fact()
    command = instance.command(**kwargs)
    if isinstance(command, StringCommand):
        command = command.get_masked_value()
    required = instance.requires_command(**kwargs)
    if not required:
        return _exactly(command)
    return re.compile(
        rf"\Aif command -v {re.escape(required)} >/dev/null 2>&1; then \( "
        rf"{re.escape(command)} \); else echo '[^']*'; fi\Z"
    )


def _all_answered(state: State, answered: dict[str, list[re.Pattern]]) -> None:
    """Raise on the commands a node's facts did not answer (the catch-all failed them)."""
    missing = []
    for host in state.inventory:
        name = host.name.removeprefix("@fake/")
        for command in host.connector.executed_commands:
            if not any(pattern.search(command) for pattern in answered[name]):
                missing.append(f"{name}: {_described(command)}")
    if missing:
        raise UnansweredRead("the fake node answers no read of:\n" + "\n".join(missing))


def _described(command: str) -> str:
    """A command no answer matched, shortened; the node's one read by its parts."""
    parts = batch.commands_of(command)
    if parts:
        return "its one read, of parts: " + " | ".join(p[:80] for p in parts)
    return command[:160]


def run_on_controller(result: Plan, node: str, names: tuple[str, ...]) -> None:
    """Run what the operations `names` of `node` run on the controller, as the deploy does
    once it runs them (planning runs none: a dry run writes nothing)."""
    for op in result.ops[node]:
        if op.name in names:
            for command in op.functions:
                command.function(None, _Controller(node), *command.args, **command.kwargs)


@dataclass
class _Controller:
    """The host a controller-side function is given: its log prefix only."""

    name: str

    @property
    def print_prefix(self) -> str:
        return f"[{self.name}] "


def fact_reads(result: Plan, node: str) -> list[str]:
    """The commands planning ran on `node` but the temporary directory pyinfra reads once to
    upload a changed file (no upload, no such read)."""
    return [c for c in result.read[node] if "TMPDIR" not in c]


def one_read(result: Plan) -> None:
    """Every node of the plan was read in one command: its reads (`reads.NodeReads`)."""
    for node in result.read:
        commands = fact_reads(result, node)
        assert len(commands) == 1 and batch.MARK in commands[0], (
            node,
            [c[:60] for c in commands],
        )


def target_of(upload: str) -> str:
    """The file an upload replaces: text_file uploads to `.NAME.halo-new` beside it."""
    folder, _, base = upload.rpartition("/")
    return f"{folder}/{base.removeprefix('.').removesuffix('.halo-new')}"


def _conditions_hold(conditions) -> bool:
    if callable(conditions):
        conditions = [conditions]
    return all(condition() for condition in conditions or [])


def _name(state: State, op_hash: str) -> str:
    return " | ".join(sorted(state.op_meta[op_hash].names))


def _collect(state: State) -> dict[str, list[PlannedOp]]:
    result: dict[str, list[PlannedOp]] = {}
    for host in state.inventory:
        ops = []
        for op_hash in state.get_op_order():
            if op_hash not in state.ops[host]:
                continue
            op = PlannedOp(name=_name(state, op_hash))
            op.runs = _conditions_hold(state.ops[host][op_hash].global_arguments.get("_if"))
            with ctx_host.use(host):
                for command in state.ops[host][op_hash].command_generator():
                    if isinstance(command, FileUploadCommand):
                        op.uploads[target_of(command.dest)] = command.src.getvalue()
                    elif isinstance(command, StringCommand):
                        op.commands.append(command.get_raw_value())
                    else:
                        op.commands.append(repr(command))
                        if isinstance(command, FunctionCommand):
                            op.functions.append(command)
            ops.append(op)
        result[host.name.removeprefix("@fake/")] = ops
    return result
