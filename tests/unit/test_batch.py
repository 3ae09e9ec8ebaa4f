"""The one batched-script format (halo_cluster/node/batch.py), run here by a real shell as a
node's would: each command reads back exactly as if it had run alone, whatever it prints."""

from __future__ import annotations

import subprocess
import time

from halo_cluster.node import batch

COMMANDS = [
    "echo one; echo two",
    "printf 'no final newline'",
    "echo to-stderr >&2; exit 3",
    "true",
    "exit 7  # a command ending in a comment",
    "printf '@@halo-part 9 9 9 9\\n\\0\\377'",  # a header out of turn, and binary, is output
    "printf '\\n\\n'",  # blank lines only
    "sleep 0.2; echo slow",  # finishes after the ones below it
    "cat",  # reads nothing: stdin is closed
]


def alone(command: str) -> batch.Part:
    done = subprocess.run(["sh", "-c", command], capture_output=True, stdin=subprocess.DEVNULL)
    return batch.Part(done.returncode, done.stdout, done.stderr)


def ran(script: str) -> bytes:
    return subprocess.run(["sh", "-s"], input=script.encode(), capture_output=True).stdout


def test_each_command_reads_as_if_run_alone() -> None:
    assert batch.split(ran(batch.script(COMMANDS))) == [alone(c) for c in COMMANDS]


def test_a_cut_output_keeps_the_complete_commands_only() -> None:
    output = ran(batch.script(COMMANDS[:3]))
    cut = output[: output.index(b"to-stderr") + 3]
    assert batch.split(cut) == [alone(c) for c in COMMANDS[:2]]
    assert batch.split(b"") == []


def test_the_commands_run_at_once() -> None:
    start = time.monotonic()
    assert [p.out for p in batch.split(ran(batch.script(["sleep 0.5; echo a"] * 4)))] == ["a\n"] * 4
    assert time.monotonic() - start < 1.5


def test_named_sections_and_the_lines_as_pyinfra_reads_them() -> None:
    names = {"units": "printf 'Id=a\\n\\nId=b\\n'", "health": "printf 200", "none": "true"}
    found = batch.sections(ran(batch.named(names)), [*names, "later"])
    assert found["units"].lines == ["Id=a", "", "Id=b"]
    assert found["units"].filled == ["Id=a", "Id=b"]
    assert found["health"].lines == ["200"] and found["none"].lines == []
    assert found["later"] == batch.Part(batch.NOT_RUN)


def test_joined_is_what_the_script_prints() -> None:
    parts = [alone(c) for c in COMMANDS]
    assert batch.joined(parts) == ran(batch.script(COMMANDS))
    assert batch.split(batch.joined(parts)) == parts
    assert batch.commands_of(batch.script(COMMANDS)) == COMMANDS
