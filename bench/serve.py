"""Cluster services on the built-in lab: a script that prints numbers, not a test.

    .venv/bin/python -m bench.serve [--repeat 3] [--launcher ray|native]    (at the checkout's
    top: lab/ is not installed)

On a converged 2-node lab (the lab's stand-in vllm; real Ray with `--launcher ray`, vLLM's own
multi-node launcher with `native`): the deploy that enables `serve:` until /health answers 200
(the deploy itself waits for it), a reboot of both nodes until /health answers 200 with no
deploy, with Ray the recovery from each fault of lab/faults.py (a crash until vLLM serves
steadily again, no deploy), with either the worker's rank killed and then the head's own until a
completion is answered again, and the memory of each node (PSS of every process in the node's
cgroup) and of each service's processes (RSS and PSS). Median of --repeat runs. Needs root, like
the lab.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from lab import cli, faults, node

ROOT = Path(__file__).resolve().parents[1]
PYINFRA = str(Path(sys.executable).parent / "pyinfra")
SERVE = (ROOT / "lab" / "serve.yml").read_text()
HEALTH = "curl -s -o /dev/null -m 5 -w '%{http_code}' http://192.168.100.1:8000/health"
# a request as a user's: with native a rank's death blocks it until vLLM's execute_model timeout
COMPLETION = (
    "curl -s -o /dev/null -m 900 -w '%{http_code}' http://192.168.100.1:8000/v1/completions "
    """-H 'Content-Type: application/json' -d '{"prompt": "ping", "max_tokens": 1}'"""
)
# the worker's rank, killed -9: Ray's actor for its GPU (the stand-in's `RayWorkerProc`, `Rank`
# before c8b8737), or the native launcher's headless `vllm serve`
KILL_RANK = {
    "ray": "pkill -KILL -f '^[r]ay::(RayWorkerProc|Rank)'",
    "native": "pkill -KILL -f '[v]llm serve .*--headless'",
}
SERVICES = ("halo-ray", "halo-vllm")


def served(launcher: str) -> str:
    """lab/serve.yml with `serve.launcher` (the lab's own is Ray, the default)."""
    if launcher == "ray":
        return SERVE
    return SERVE.replace("serve:\n", f"serve:\n  launcher: {launcher}\n", 1)


def deploy(extra: str) -> float:
    config = cli.LAB_DIR / "cluster-bench.yml"
    config.write_text(cli.CONFIG.read_text() + "reboot: if-needed\n" + extra)
    start = time.monotonic()
    result = subprocess.run(
        [PYINFRA, "-y", "inventory.py", "deploy.py"],
        cwd=ROOT,
        env=dict(os.environ, CLUSTER_CONFIG=str(config)),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    if result.returncode != 0:
        raise SystemExit(f"deploy failed: {result.stderr[-2000:]}")
    return time.monotonic() - start


def lab(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "lab", *args], cwd=ROOT, check=True, capture_output=True)


def answers(request: str) -> bool:
    address = cli.node_address(cli.load_state(), "node1")
    result = subprocess.run([*cli.ssh_argv(address), request], capture_output=True, text=True)
    return result.stdout.strip() == "200"


def healthy() -> bool:
    return answers(HEALTH)


def head_started() -> str:
    """The head vLLM unit's start: changed by systemd's restart and the watchdog's stop and
    start alike (NRestarts counts only systemd's)."""
    return faults.user("node1", "systemctl --user show -p InvocationID --value halo-vllm")


def killed_until_served(kill: Callable[[], object], what: str, timeout: float = 900) -> float:
    """Seconds from `kill` until the head's vLLM, started since, answers a completion; one
    request after another all along, as users' would."""
    before = head_started()
    start = time.monotonic()
    kill()
    while not (answers(COMPLETION) and head_started() != before):
        if time.monotonic() - start > timeout:
            raise SystemExit(f"{what}: not serving after {timeout:.0f} s")
        time.sleep(0.5)
    return time.monotonic() - start


def rank_killed(launcher: str) -> float:
    kill = KILL_RANK[launcher]
    return killed_until_served(lambda: faults.ssh("node2", kill), "the worker's rank killed")


def head_killed() -> float:
    """The head's rank (its vLLM container, rank 0 with native) killed: systemd restarts it, and
    with native the worker's ranks must meet it again on the master port."""
    kill = faults.FAULTS["vLLM killed"]
    return killed_until_served(kill, "the head's rank killed")


def reboot_to_health() -> float:
    start = time.monotonic()
    reboots = [
        subprocess.Popen([sys.executable, "-m", "lab", "reboot", name], cwd=ROOT)
        for name in ("node1", "node2")
    ]
    for process in reboots:
        process.wait()
    while not healthy():
        if time.monotonic() - start > 600:
            raise SystemExit("not serving 600 s after the reboot")
        time.sleep(0.5)
    return time.monotonic() - start


def memory_mib(name: str) -> dict[str, dict[str, float]]:
    """RSS and PSS (MiB) of the node's processes by service (their cgroup), and of the whole
    node; each process once (a hybrid host lists it in two hierarchies)."""
    pids = {pid for group in node.cgroup_dirs(name) for pid in node.cgroup_pids(group)}
    found: dict[str, dict[str, float]] = {}
    for pid in pids:
        try:
            cgroup = Path(f"/proc/{pid}/cgroup").read_text()
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        owner = next((s for s in SERVICES if f"/{s}.service" in cgroup), "the node's own")
        for line in rollup.splitlines():
            field = line.split(":")[0]
            if field in ("Rss", "Pss"):
                for key in (owner, "whole node"):
                    sizes = found.setdefault(key, {"Rss": 0.0, "Pss": 0.0})
                    sizes[field] += int(line.split()[1]) / 1024
    return found


def row(measure: str, times: list[float]) -> None:
    runs = ", ".join(f"{t:.1f}" for t in times)
    print(f"| {measure} | {statistics.median(times):.1f} | {runs} |")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--launcher", choices=tuple(KILL_RANK), default="ray")
    args = parser.parse_args(argv)
    serve = served(args.launcher)
    lab("up", "--nodes", "2", "--link", "roce")
    deploy("serve: {enabled: false}\n")
    to_health = []
    for _ in range(args.repeat):
        to_health.append(deploy(serve))
        deploy("serve: {enabled: false}\n")
    deploy(serve)
    after_reboot = [reboot_to_health() for _ in range(args.repeat)]
    ray_faults = faults.FAULTS if args.launcher == "ray" else {}
    recoveries = {
        fault: [faults.recover(fault) for _ in range(args.repeat)] for fault in ray_faults
    }
    killed = [rank_killed(args.launcher) for _ in range(args.repeat)]
    head = [head_killed() for _ in range(args.repeat)]
    time.sleep(10)  # let the services settle after their start
    print(f"launcher: {args.launcher}")
    print("| measure | seconds (median) | runs |")
    print("|---|---|---|")
    row("deploy enabling serve on converged nodes to /health 200", to_health)
    row("reboot of both nodes to /health 200 (no deploy)", after_reboot)
    for fault, times in recoveries.items():
        row(f"{fault}, until vLLM serves steadily again", times)
    row("the worker's rank killed (-9), until a restarted head answers a completion", killed)
    row("the head's rank killed (its container), until it answers a completion again", head)
    for name in ("node1", "node2"):
        for owner, sizes in sorted(memory_mib(name).items()):
            print(
                f"memory of {name}, {owner}: {sizes['Rss']:.0f} MiB RSS, {sizes['Pss']:.0f} MiB PSS"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
