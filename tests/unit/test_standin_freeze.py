"""`python -m lab freeze NODE --seconds N` (lab/freeze.py): its arguments refused in one line
before any node is reached, and the processes it would stop found by the titles the stand-in's
workers carry (the lab's freeze itself is exercised by the watchdog's e2e test)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab import cli, command, freeze

STANDIN = Path(__file__).resolve().parents[2] / "lab" / "standin"


@pytest.fixture
def lab_state(tmp_path, monkeypatch) -> Path:
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"nodes": ["node1", "node2"]}))
    monkeypatch.setattr(cli, "STATE", state)
    return state


MORE = "the seconds must be more than 0"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["node9", "--seconds", "5"], "freeze: no lab node named 'node9' (nodes: node1, node2)"),
        (["node2", "--seconds", "0"], f"freeze --seconds 0.0: {MORE}"),
        (["node2", "--seconds", "-3"], f"freeze --seconds -3.0: {MORE}"),
    ],
)
def test_a_bad_node_or_time_is_refused_in_one_line(lab_state, capsys, argv, message) -> None:
    def unreachable() -> list[str]:
        raise AssertionError("no node is reached for refused arguments")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cli, "ssh_argv", lambda *_: unreachable())
        assert command.main(["freeze", *argv]) == 1
    assert capsys.readouterr().err.strip() == f"lab: {message}"


@pytest.mark.parametrize("argv", [["node2"], ["node2", "--seconds", "ten"], ["--seconds", "5"]])
def test_the_node_and_a_number_of_seconds_are_required(lab_state, capsys, argv) -> None:
    with pytest.raises(SystemExit) as ended:
        command.main(["freeze", *argv])
    assert ended.value.code == 2
    assert "usage: python -m lab freeze" in capsys.readouterr().err


def test_a_node_without_a_rank_says_so(lab_state, capsys) -> None:
    """A node where nothing matches (here: a shell that finds nothing) is refused, not frozen."""
    with pytest.raises(cli.LabError, match="no vLLM rank process runs on node2"):
        freeze.freeze(["node1", "node2"], "node2", 1, lambda: ["sh", "-c", "true", "--"])


def test_the_pattern_finds_the_stand_ins_workers_by_their_title() -> None:
    """The native launcher's worker is titled as vLLM's (VLLM::Worker_TP<rank>); pgrep -f with
    freeze's pattern finds it as the node's root would (looking only, nothing is signalled)."""
    sys.path.insert(0, str(STANDIN))
    import vllm_native

    worker = vllm_native.Worker(7)
    try:
        found = subprocess.run(
            ["pgrep", "-f", freeze.RANK_PROCESSES], capture_output=True, text=True
        ).stdout.split()
        assert str(worker.process.pid) in found
        title = Path(f"/proc/{worker.process.pid}/cmdline").read_bytes().split(b"\0")[0]
        assert title == b"VLLM::Worker_TP7"
    finally:
        worker.process.kill()
        worker.process.wait()


def process_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def settles(pid: int, stopped: bool) -> bool:
    """The process is stopped (or not) within 5 s: a signal takes effect when its target next
    runs, not when kill returns."""
    deadline = time.monotonic() + 5
    while (process_state(pid) == "T") != stopped:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_the_freeze_early_and_resumes_the_rank(signum) -> None:
    """Started as CI's shell starts a background job, with SIGINT ignored from the start (where
    Python installs no KeyboardInterrupt): either signal still ends the freeze at once, the rank
    resumed. The node's shell is a local one that finds one stand-in rank, a sleeping child."""
    rank = subprocess.Popen(["sleep", "300"])
    node = f'case "$1" in pgrep*) echo {rank.pid};; *) eval "$1";; esac'
    code = (
        "from lab import freeze\n"
        f"freeze.freeze(['node2'], 'node2', 120, lambda: ['sh', '-c', {node!r}, 'node'])\n"
    )
    run = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=STANDIN.parents[1],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        assert "vLLM rank frozen" in run.stdout.readline()
        assert settles(rank.pid, stopped=True)
        run.send_signal(signum)
        output, _ = run.communicate(timeout=15)
        assert run.returncode == 0
        assert f"ended early by {signum.name}" in output, output
        assert settles(rank.pid, stopped=False)
    finally:
        run.kill()
        rank.kill()
        rank.wait()
