"""The verification's one read per node (tests/infra/target.py): the script that runs every
check's command at once gives each the exit status, stdout and stderr it has when run alone.
Run here by this machine's own shell, as a node's would."""

from __future__ import annotations

import subprocess

from tests.infra.target import batch_script, split_batch

COMMANDS = [
    "echo one; echo two",
    "printf 'no final newline'",
    "echo to-stderr >&2; exit 3",
    "true",
    "exit 7  # a command ending in a comment",
    "printf '@@halo-verify 9 9 9 9\\n\\0\\377'",
    "sleep 0.2; echo slow",
    "cat",  # reads nothing: stdin is closed
]


def alone(command: str) -> tuple[int, bytes, bytes]:
    result = subprocess.run(["sh", "-c", command], capture_output=True, stdin=subprocess.DEVNULL)
    return result.returncode, result.stdout, result.stderr


def test_each_command_reads_as_if_run_alone() -> None:
    output = subprocess.run(["sh", "-c", batch_script(COMMANDS)], capture_output=True).stdout
    assert split_batch(output) == [alone(command) for command in COMMANDS]


def test_a_cut_output_keeps_the_complete_commands_only() -> None:
    output = subprocess.run(["sh", "-c", batch_script(COMMANDS[:3])], capture_output=True).stdout
    cut = output[: output.index(b"to-stderr") + 3]
    assert split_batch(cut) == [alone(command) for command in COMMANDS[:2]]
    assert split_batch(b"") == []
