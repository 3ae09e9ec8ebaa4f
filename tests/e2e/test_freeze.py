"""`python -m lab freeze NODE --seconds N` on the serving lab (Ray's launcher): the worker's vLLM
rank stopped (its `ray::RayWorkerProc`, not Ray's own processes) holds the head's completion
while the head's /health stays 200, as in vLLM; resumed, the completion is answered and the
engine serves on (issue 37 item 8). And `status` with the worker's user manager stopped."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from halo_cluster.tools.status.read import PART_SECONDS, READ_SECONDS
from tests.e2e.conftest import ROOT, Lab
from tests.e2e.helpers_cluster import HALO_CLUSTER, run
from tests.e2e.serving_lab import HEAD, SERVE, health

HOLD = 8  # seconds frozen: far inside VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS (300)


def completion(lab: Lab) -> tuple[str, float]:
    """The HTTP status of a short completion and its seconds."""
    out = lab.ssh(
        "node1",
        f"curl -s -o /dev/null -m 60 -w '%{{http_code}} %{{time_total}}' "
        f"http://{HEAD}:8000/v1/completions -H 'Content-Type: application/json' "
        """-d '{"prompt": "hi", "max_tokens": 4}'""",
    )
    code, seconds = out.split()
    return code, float(seconds)


def states(lab: Lab, pattern: str) -> set[str]:
    """The process states (ps' first letter) of the node's processes matching `pattern`."""
    out = lab.ssh("node2", f"for p in $(pgrep -f '{pattern}'); do ps -o stat= -p $p; done")
    return {line.strip()[:1] for line in out.splitlines() if line.strip()}


def test_a_frozen_rank_holds_the_heads_requests_while_health_stays_200(served: Lab) -> None:
    lab = served  # only read: the frozen rank resumes before the test ends
    assert completion(lab)[0] == "200"
    freezer = subprocess.Popen(
        [sys.executable, "-m", "lab", "freeze", "node2", "--seconds", str(HOLD)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    frozen = freezer.stdout.readline()
    assert "node2: vLLM rank frozen (SIGSTOP to " in frozen, frozen
    started = time.monotonic()
    answer: list[tuple[str, float]] = []
    asking = threading.Thread(target=lambda: answer.append(completion(lab)))
    asking.start()
    assert states(lab, "^ray::RayWorkerProc") == {"T"}, "the rank is stopped"
    assert "T" not in states(lab, "[r]aylet/raylet"), "Ray's own processes run on"
    time.sleep(2)
    assert asking.is_alive(), "the completion waits for the frozen rank"
    assert health(lab) == "200", "the head's /health stays 200 meanwhile"
    asking.join(60)
    assert freezer.wait(timeout=30) == 0
    assert "node2: vLLM rank resumed (SIGCONT to " in freezer.stdout.read()
    code, seconds = answer[0]
    assert code == "200" and seconds >= HOLD - (time.monotonic() - started) - 1, answer
    assert seconds > HOLD / 2, answer
    assert completion(lab)[0] == "200" and health(lab) == "200"


def test_status_names_a_worker_whose_user_manager_is_frozen(served: Lab) -> None:
    """Issue 37's report: `status` while the worker's cluster user was stopped ended in a
    traceback. Its user manager stopped (what `systemctl --user` waits on; Ray and the rank run
    on, so the serving lab is only read): each part of the read that asks it is stopped at its
    bound, said in one line naming the node, the rest read, exit 2 (something is down)."""
    lab = served
    config = lab.config("reboot: if-needed\n" + SERVE)
    manager = lab.ssh("node2", "pgrep -u vllm -x systemd").split()
    assert len(manager) == 1, manager
    lab.ssh("node2", f"kill -STOP {manager[0]}")
    try:
        started = time.monotonic()
        found = run([HALO_CLUSTER, "status", "--config", str(config)], config, timeout=120)
        took = time.monotonic() - started
    finally:
        lab.ssh("node2", f"kill -CONT {manager[0]}")
    said = found.stdout + found.stderr
    assert "Traceback" not in said, said
    start = f"node2: reached, but no answer within {PART_SECONDS} s from its read of "
    lines = [line for line in said.splitlines() if line.startswith(start)]
    assert len(lines) == 1 and "units" in lines[0], said
    assert found.returncode == 2, said
    print(f"status with node2's user manager stopped: {took:.1f} s (exit {found.returncode})")
    assert took < READ_SECONDS + 15, f"{took:.1f} s"
