"""The deploy's one read per node (halo_cluster/node/reads.py): the batched script it runs
(node/batch.py), run here by a real shell, gives each part exactly the lines and status its own
command gives, read from the output's lines as pyinfra gives them."""

from __future__ import annotations

import subprocess
import time

import pytest
from pyinfra.facts.rpm import RpmPackages

from halo_cluster.node import batch, reads
from halo_cluster.node.facts import TextFiles
from halo_cluster.node.firewalldfact import Firewalld
from halo_cluster.node.reads import (
    NO_COMMAND,
    _value,
    join_output,
    part_command,
    split_output,
)
from halo_cluster.roles.network.facts import NmActiveConnections

PARTS = [
    "printf 'a\\nb\\n'",  # ends in a newline
    "printf 'no newline'",
    "true",  # no output
    "printf '\\n\\n'",  # empty lines only
    "echo one; exit 3",  # an exit ends only its own part
    "echo '@@halo-part 0 0 0 0'",  # a header out of turn is output
    "sleep 0.2; echo slow",  # finishes after the ones below it
    "echo err >&2; echo out",
]


def run(command: str) -> tuple[int, list[str]]:
    """A command's status and stdout lines, split as pyinfra splits them."""
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    return done.returncode, done.stdout.splitlines()


def test_each_part_reads_as_its_own_command() -> None:
    status, output = run(batch.script(PARTS))
    assert status == 0
    assert split_output(output) == [run(part) for part in PARTS]


def test_the_parts_run_at_once() -> None:
    _, output = run(batch.script(["sleep 0.5; echo a", "sleep 0.5; echo b"]))
    assert split_output(output) == [(0, ["a"]), (0, ["b"])]
    start = time.monotonic()
    run(batch.script(["sleep 0.5"] * 4))
    assert time.monotonic() - start < 1.5


def test_the_harness_answers_what_the_script_prints() -> None:
    results = [(0, ["a", ""]), (1, []), (0, ["x"])]
    assert split_output(join_output(results)) == results
    assert batch.commands_of(batch.script(PARTS)) == PARTS
    assert split_output(join_output([])) == []


def test_a_part_is_the_command_pyinfra_runs() -> None:
    assert part_command(TextFiles, {"paths": ("/etc/passwd",)}) == TextFiles().command(
        ("/etc/passwd",)
    )
    rpm = part_command(RpmPackages, {})
    assert rpm.startswith("if command -v rpm >/dev/null 2>&1; then ( rpm --queryformat ")
    assert "'%{NAME} %{VERSION}-%{RELEASE}\\n'" in rpm


@pytest.mark.parametrize(
    ("status", "lines", "expected"),
    [
        (0, [], {}),  # no output: default()
        (0, [NO_COMMAND], {}),  # nmcli not installed: default(), as pyinfra before any change
        (0, ["halo-data:enp194s0np0"], {"halo-data": "enp194s0np0"}),
    ],
)
def test_a_part_is_processed_as_pyinfra_does(status, lines, expected) -> None:
    assert _value(NmActiveConnections, status, lines) == expected


def test_a_failed_part_is_left_to_pyinfra() -> None:
    """A non-zero exit is not read here: `cached()` asks pyinfra, which reports it."""
    assert _value(Firewalld, 1, ["state running"]) is reads._MISSING
