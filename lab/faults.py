"""Faults a serving lab heals from by itself, and how long it takes: shared by the e2e test that
proves each recovery and bench/serve.py, which prints the times.

A fault is injected the way it happens on a real machine (a crash is a SIGKILL, a reboot is a
reboot); recovered means vLLM restarted after it and then answers /health 200 steadily, with Ray
showing every GPU again: no deploy, no person."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from halo_cluster.node.facts import as_user
from lab import cli

ROOT = Path(__file__).resolve().parents[1]
HEAD_URL = "http://192.168.100.1:8000"
STEADY_CHECKS = 3  # consecutive /health 200s, STEADY_SECONDS apart
STEADY_SECONDS = 1


def ssh(node: str, command: str) -> str:
    address = cli.node_address(cli.load_state(), node)
    done = subprocess.run(
        [*cli.ssh_argv(address), command], capture_output=True, text=True, timeout=120
    )
    return done.stdout


def user(node: str, command: str) -> str:
    return ssh(node, as_user("vllm", command))


def health() -> str:
    return ssh("node1", f"curl -s -o /dev/null -m 5 -w '%{{http_code}}' {HEAD_URL}/health")


def vllm_restarts() -> int:
    return int(user("node1", "systemctl --user show -p NRestarts --value halo-vllm") or 0)


def reboot(node: str) -> None:
    subprocess.run([sys.executable, "-m", "lab", "reboot", node], cwd=ROOT, check=True)


FAULTS: dict[str, Callable[[], object]] = {
    "a worker's raylet killed (-9)": lambda: ssh("node2", "pkill -KILL -f '[r]aylet/raylet'"),
    "a worker's Ray container killed": lambda: user("node2", "podman kill halo-ray"),
    "a worker rebooted": lambda: reboot("node2"),
    "the head's Ray container killed": lambda: user("node1", "podman kill halo-ray"),
    "vLLM killed": lambda: user("node1", "podman kill halo-vllm"),
}


def recover(fault: str, gpus: int = 2, timeout: float = 400) -> float:
    """Inject `fault`; seconds until the cluster serves steadily again (raises on timeout)."""
    before = vllm_restarts()
    start = time.monotonic()
    FAULTS[fault]()
    steady = 0
    while steady < STEADY_CHECKS:
        if time.monotonic() - start > timeout:
            journal = user("node1", "journalctl --user -n 30 --no-pager -q -o cat")
            raise TimeoutError(f"{fault}: not serving after {timeout:.0f} s:\n{journal[-3000:]}")
        up = vllm_restarts() > before and health() == "200"
        steady = steady + 1 if up else 0
        time.sleep(STEADY_SECONDS)
    seconds = time.monotonic() - start - STEADY_SECONDS * STEADY_CHECKS
    while f"/{gpus}.0 GPU" not in user("node1", "podman exec halo-ray ray status"):
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"{fault}: Ray does not show {gpus} GPUs again")
        time.sleep(1)
    return seconds
