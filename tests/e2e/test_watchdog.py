"""The head's stall watchdog on the serving lab (issue 37 item 5, issue 36 item 2), with short
bounds: a worker's rank frozen for 90 s (`python -m lab freeze`: its GPU worker stopped, the
head's /health still 200, every request held at the next engine step, as vLLM's collectives hold
them), with Ray; then with `serve.launcher: native` the worker's rank frozen, and killed (its
unit restarts it alone, and the head's store holds the newcomer while the head waits for the old
one, as vLLM does, vllm#32136). Each time the watchdog notices within its bound, restarts the
services on every node (a `watchdog-restart` line in the head's history) and the cluster answers
a completion again. The serving lab is changed and restored (`serving`)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.conftest import ROOT, Lab, failure
from tests.e2e.helpers_cluster import HALO_CLUSTER, run
from tests.e2e.serving_lab import HEAD, SERVE, user, wait_serving
from tests.e2e.waits import until

TIMEOUT, INTERVAL, MISSES = 5, 2, 2
FAST = (
    f"  watchdog_timeout_seconds: {TIMEOUT}\n  watchdog_interval_seconds: {INTERVAL}\n"
    f"  watchdog_misses: {MISSES}\n"
)
# from the first held completion to the restart's line: MISSES checks of TIMEOUT each, the
# INTERVAL after each, and one INTERVAL the first probe may wait to start; 5 s for the lab's SSH
BOUND = MISSES * (TIMEOUT + INTERVAL) + INTERVAL + 5
FREEZE = 90
HISTORY = "~vllm/.local/state/halo-cluster/history.jsonl"


def config(lab: Lab, native: bool = False, fast: bool = True) -> Path:
    """Deploy the lab's serving config with the watchdog's short bounds (and the launcher)."""
    serve = SERVE.replace("serve:\n", "serve:\n" + (FAST if fast else ""), 1)
    if native:
        serve = serve.replace("serve:\n", "serve:\n  launcher: native\n", 1)
    path = lab.config("reboot: if-needed\n" + serve)
    result = lab.deploy(config=path)
    assert result.returncode == 0, failure(result)
    wait_serving(lab)
    return path


def restarts(lab: Lab) -> list[dict]:
    lines = lab.ssh("node1", f"cat {HISTORY} 2>/dev/null || true").splitlines()
    events = [json.loads(line) for line in lines if '"watchdog-' in line]
    return [e for e in events if e["event"] == "watchdog-restart"]


def answers(lab: Lab) -> bool:
    """One completion answered within 5 s."""
    body = '{"prompt": "ping", "max_tokens": 1}'
    reply = lab.ssh("node1", f"curl -s -m 5 http://{HEAD}:8000/v1/completions "
                    f"-H 'Content-Type: application/json' -d '{body}'", check=False)  # fmt: skip
    return '"choices"' in reply


def seconds_until(what, timeout: float) -> float:
    """Seconds until `what()` is true (fails after `timeout`)."""
    return until(what, timeout, what.__doc__ or str(what))[1]


def healed(lab: Lab, before: int, launcher: str, fault: str) -> float:
    """Seconds from the fault until a completion answers again, the watchdog's restart line
    within its bound before it (both printed)."""
    start = time.monotonic()
    noticed = seconds_until(lambda: len(restarts(lab)) > before, BOUND + 60)
    line = restarts(lab)[-1]
    assert line["launcher"] == launcher
    assert f"unanswered within {TIMEOUT} s while /health answers 200" in line["reason"], line
    seconds_until(lambda: answers(lab), 180)
    served = time.monotonic() - start
    print(f"{fault} ({launcher}): restart after {noticed:.0f} s, serving after {served:.0f} s")
    assert noticed <= BOUND, f"noticed after {noticed:.0f} s, the bound {BOUND} s"
    return served


def freeze_worker() -> subprocess.Popen:
    """`python -m lab freeze node2 --seconds FREEZE`, started and given a second to reach the
    node (its first line says so)."""
    freeze = subprocess.Popen(
        [sys.executable, "-m", "lab", "freeze", "node2", "--seconds", str(FREEZE)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    time.sleep(1)
    return freeze


def test_a_frozen_rank_is_restarted_and_serves_during_the_freeze(serving: Lab) -> None:
    lab = serving
    path = config(lab)
    assert user(lab, "node1", "systemctl --user is-active halo-watchdog").strip() == "active"
    assert answers(lab)
    before = len(restarts(lab))
    freeze = freeze_worker()
    try:
        served = healed(lab, before, "ray", f"node2's rank frozen for {FREEZE} s")
        # the restart stops the frozen processes with their containers (SIGKILL reaches a
        # stopped process): the new rank is not frozen, so the cluster may serve before the thaw
        print(f"serving again {'during' if served < FREEZE else 'after'} the {FREEZE} s freeze")
    finally:
        output, _ = freeze.communicate(timeout=FREEZE + 60)
    assert freeze.returncode == 0 and "vLLM rank frozen" in output, output
    status = run([HALO_CLUSTER, "status", "--config", str(path)], path)
    assert "watchdog: active; last restart" in status.stdout, status.stdout + status.stderr
    assert seconds_until(lambda: answers(lab), 30) < 30  # still serving after the thaw


def test_a_frozen_native_rank_is_restarted_with_every_rank(serving: Lab) -> None:
    """With vLLM's own launcher: no Ray to notice anything, the head's step waits on the frozen
    rank's collective as vLLM's does; the watchdog restarts every rank. The freeze is then
    interrupted (its SIGCONT reaches no process: the restart replaced the rank), not waited out."""
    lab = serving
    config(lab, native=True)
    assert answers(lab)
    before = len(restarts(lab))
    freeze = freeze_worker()
    try:
        healed(lab, before, "native", f"node2's rank frozen (of {FREEZE} s)")
    finally:
        # its `finally` sends the SIGCONT, then it ends (SIGTERM: a background job's SIGINT
        # may be ignored from its start, lab/freeze.py)
        freeze.send_signal(signal.SIGTERM)
        output, _ = freeze.communicate(timeout=60)
    assert "vLLM rank frozen" in output and "ended early by SIGTERM" in output, output


def test_a_killed_native_rank_is_brought_back_with_every_rank(serving: Lab) -> None:
    lab = serving
    config(lab, native=True)
    assert answers(lab)
    before = len(restarts(lab))
    user(lab, "node2", "podman kill halo-vllm")
    healed(lab, before, "native", "node2's rank killed")
    assert user(lab, "node2", "systemctl --user is-active halo-vllm").strip() == "active"
    config(lab, fast=False)  # the lab's own config again: Ray, the default bounds
