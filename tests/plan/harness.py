"""Plan the deploy against pyinfra's @fake connector and return what it would do, per node.

Facts come from `fake_responses` built from outputs recorded on real hosts (tests/plan/fixtures,
copied from shared/reference/recorded), keyed by a piece of each fact's own command; the
deploy's one read per node (`reads.NodeReads`) is answered part by part from them. Nothing runs
anywhere: operations are prepared and their command generators read, so file uploads can be
inspected as text.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pyinfra
from pyinfra.api import Config, Inventory, State
from pyinfra.api.command import FileUploadCommand, StringCommand
from pyinfra.api.connect import connect_all
from pyinfra.api.state import StateStage
from pyinfra.connectors.fake import FakeConnector
from pyinfra.connectors.util import CommandOutput, OutputLine
from pyinfra.context import ctx_host, ctx_state
from pyinfra_cli.util import load_deploy_file

from halo_cluster.config.hostdata import inventory_groups
from halo_cluster.config.model import Cluster
from halo_cluster.node import reads, report

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class PlannedOp:
    name: str
    commands: list[str] = field(default_factory=list)
    uploads: dict[str, str] = field(default_factory=dict)  # path -> text
    runs: bool = True  # its `_if` conditions, as the run evaluates them after every node planned


@dataclass
class Plan:
    ops: dict[str, list[PlannedOp]]  # node name -> operations in order
    refused: dict[str, str] = field(default_factory=dict)  # node name -> reason
    # node name -> the commands the deploy ran on it while planning: its fact reads
    read: dict[str, list[str]] = field(default_factory=dict)
    log: str = ""

    def names(self, node: str) -> list[str]:
        return [op.name for op in self.ops[node]]

    def commands(self, node: str) -> list[str]:
        return [c for op in self.ops[node] for c in op.commands]

    def uploads(self, node: str) -> dict[str, str]:
        return {p: t for op in self.ops[node] for p, t in op.uploads.items()}


def plan(cluster: Cluster, responses: dict[str, dict]) -> Plan:
    """Prepare deploy.py for every node of `cluster` on the @fake connector."""
    groups = inventory_groups(cluster)
    all_hosts, group_hosts = [], {}
    for group, hosts in groups.items():
        entries = [
            (
                f"@fake/{name}",
                dict(data, fake_responses=responses[name], fake_delay=0, fake_delay_jitter=0),
            )
            for name, data in hosts
        ]
        all_hosts += entries
        group_hosts[group] = ([name for name, _ in entries], {})
    inventory = Inventory((all_hosts, {}), **group_hosts)
    state = State(inventory, Config())
    # order operations by their line in the deploy files, as the pyinfra CLI does
    pyinfra.is_cli = True
    state.current_op_file_number = 0
    cwd = os.getcwd()
    os.chdir(ROOT)
    FakeConnector._lookup_response = _lookup_reads  # type: ignore[method-assign]
    try:
        with ctx_state.use(state):
            state.set_stage(StateStage.Connect)
            connect_all(state)
            state.set_stage(StateStage.Prepare)
            load_deploy_file(state, str(ROOT / "deploy.py"))
            refused = {e["node"]: e["reason"] for e in report.events(state, "refused")}
            read = {  # before _collect, whose uploads ask for a temporary directory
                h.name.removeprefix("@fake/"): list(h.connector.executed_commands)
                for h in state.inventory
            }
            return Plan(_collect(state), refused=refused, read=read)
    finally:
        FakeConnector._lookup_response = _lookup  # type: ignore[method-assign]
        pyinfra.is_cli = False
        os.chdir(cwd)


_lookup = FakeConnector._lookup_response


def _lookup_reads(self: FakeConnector, command: str) -> tuple[bool, CommandOutput]:
    """The recorded outputs, and for the deploy's one read per node each part's own answer."""
    parts = reads.parts_of(command)
    if not parts:
        return _lookup(self, command)
    answers = [_lookup(self, part) for part in parts]
    output = reads.join_output((0 if ok else 1, out.stdout_lines) for ok, out in answers)
    return True, CommandOutput([OutputLine("stdout", line) for line in output])


def fact_reads(result: Plan, node: str) -> list[str]:
    """The commands planning ran on `node` but the temporary directory pyinfra reads once to
    upload a changed file (no upload, no such read)."""
    return [c for c in result.read[node] if "TMPDIR" not in c]


def one_read(result: Plan) -> None:
    """Every node of the plan was read in one command: its reads (`reads.NodeReads`)."""
    for node in result.read:
        commands = fact_reads(result, node)
        assert len(commands) == 1 and reads.MARK in commands[0], (
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


def _collect(state: State) -> dict[str, list[PlannedOp]]:
    result: dict[str, list[PlannedOp]] = {}
    for host in state.inventory:
        ops = []
        for op_hash in state.get_op_order():
            if op_hash not in state.ops[host]:
                continue
            meta = state.op_meta[op_hash]
            op = PlannedOp(name=" | ".join(sorted(meta.names)))
            op.runs = _conditions_hold(state.ops[host][op_hash].global_arguments.get("_if"))
            with ctx_host.use(host):
                for command in state.ops[host][op_hash].command_generator():
                    if isinstance(command, FileUploadCommand):
                        op.uploads[target_of(command.dest)] = command.src.getvalue()
                    elif isinstance(command, StringCommand):
                        op.commands.append(command.get_raw_value())
                    else:
                        op.commands.append(repr(command))
            ops.append(op)
        result[host.name.removeprefix("@fake/")] = ops
    return result
