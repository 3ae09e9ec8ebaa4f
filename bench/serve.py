"""Cluster services on the built-in lab: a script that prints numbers, not a test.

    .venv/bin/python -m bench.serve [--repeat 3]    (at the checkout's top: lab/ is not installed)

On a converged 2-node lab (real Ray, the lab's stand-in vllm): the deploy that enables `serve:`
until /health answers 200 (the deploy itself waits for it), a reboot of both nodes until /health
answers 200 with no deploy, the recovery from each fault of lab/faults.py (a crash until vLLM
serves steadily again, no deploy), and the memory of each node with Ray running (PSS of every
process in the node's cgroup). Median of --repeat runs. Needs root, like the lab.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from lab import cli, faults, node

ROOT = Path(__file__).resolve().parents[1]
PYINFRA = str(Path(sys.executable).parent / "pyinfra")
SERVE = (ROOT / "lab" / "serve.yml").read_text()
HEALTH = "curl -s -o /dev/null -m 5 -w '%{http_code}' http://192.168.100.1:8000/health"


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


def healthy() -> bool:
    address = cli.node_address(cli.load_state(), "node1")
    result = subprocess.run([*cli.ssh_argv(address), HEALTH], capture_output=True, text=True)
    return result.stdout.strip() == "200"


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


def pss_mib(name: str) -> float:
    total = 0
    for group in node.cgroup_dirs(name):
        for pid in node.cgroup_pids(group):
            try:
                rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
            except OSError:
                continue
            total += sum(int(line.split()[1]) for line in rollup.splitlines() if line[:4] == "Pss:")
    return total / 1024


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    lab("up", "--nodes", "2", "--link", "roce")
    deploy("serve: {enabled: false}\n")
    to_health = []
    for _ in range(args.repeat):
        to_health.append(deploy(SERVE))
        deploy("serve: {enabled: false}\n")
    deploy(SERVE)
    after_reboot = [reboot_to_health() for _ in range(args.repeat)]
    recoveries = {
        fault: [faults.recover(fault) for _ in range(args.repeat)] for fault in faults.FAULTS
    }
    time.sleep(10)  # let Ray settle after its start
    print("| measure | seconds (median) | runs |")
    print("|---|---|---|")
    print(
        f"| deploy enabling serve on converged nodes to /health 200 "
        f"| {statistics.median(to_health):.1f} | {', '.join(f'{t:.1f}' for t in to_health)} |"
    )
    print(f"| reboot of both nodes to /health 200 (no deploy) "
          f"| {statistics.median(after_reboot):.1f} "
          f"| {', '.join(f'{t:.1f}' for t in after_reboot)} |")  # fmt: skip
    for fault, times in recoveries.items():
        runs = ", ".join(f"{t:.1f}" for t in times)
        median = statistics.median(times)
        print(f"| {fault}, until vLLM serves steadily again | {median:.1f} | {runs} |")
    for name in ("node1", "node2"):
        print(f"memory of {name} with Ray running: {pss_mib(name):.0f} MiB PSS")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
