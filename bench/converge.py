"""Converge speed on the built-in lab: a script that prints numbers, not a test.

    .venv/bin/python bench/converge.py [--nodes 2 4] [--repeat 3] [--only "make verify" ...]

For each lab size: the first run on fresh nodes, a no-op re-run, a `--dry` run, `make drift` and
`make verify` (wall time, median of --repeat runs), and the SSH commands each pyinfra run issued
per node (counted from pyinfra's --debug log). `--only` measures the rows named (the nodes are
converged once for the others). Needs root, like the lab.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYINFRA = str(Path(sys.executable).parent / "pyinfra")
HALO_CLUSTER = str(Path(sys.executable).parent / "halo-cluster")
CONFIG = ROOT / ".lab" / "cluster.yml"
ENV = dict(os.environ, CLUSTER_CONFIG=str(CONFIG))
RUNS = {
    "first run": [PYINFRA, "-y", "inventory.py", "deploy.py"],
    "no-op re-run": [PYINFRA, "-y", "inventory.py", "deploy.py"],
    "--dry run": [PYINFRA, "--dry", "inventory.py", "deploy.py"],
    "make drift": [sys.executable, "-m", "halo_cluster.tools.drift", "--json-out", "/dev/null"],
    # what `make verify` runs
    "make verify": [HALO_CLUSTER, "verify", "--config", str(CONFIG)],
}


def lab(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "lab", *args], cwd=ROOT, check=True, capture_output=True)


def timed(argv: list[str]) -> float:
    start = time.monotonic()
    result = subprocess.run(
        argv, cwd=ROOT, env=ENV, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    elapsed = time.monotonic() - start
    if result.returncode not in (0, 2):  # drift exits 2 when something would change
        raise SystemExit(f"{' '.join(argv[-3:])} failed: {result.stderr[-2000:]}")
    return elapsed


def commands_per_node(argv: list[str]) -> int:
    """SSH commands pyinfra ran on node1 during one run (an upload ends in one, its `mv`)."""
    if "verify" in argv:  # verify runs through testinfra, not pyinfra: not counted
        return -1
    if "--json-out" in argv:  # drift is a --dry run underneath
        argv = RUNS["--dry run"]
    debug = [*argv[:1], "--debug", *argv[1:]]
    log = subprocess.run(
        debug, cwd=ROOT, env=ENV, capture_output=True, text=True, stdin=subprocess.DEVNULL
    ).stderr
    return len(re.findall(r"Running command on node1:", log))


def measure(nodes: int, repeat: int, rows: list[str]) -> dict[str, tuple[float, int]]:
    results: dict[str, tuple[float, int]] = {}
    firsts = []
    for _ in range(repeat if "first run" in rows else 0):
        lab("down")
        lab("up", "--nodes", str(nodes))
        firsts.append(timed(RUNS["first run"]))
    lab("down")
    lab("up", "--nodes", str(nodes))
    first_commands = commands_per_node(RUNS["first run"])
    if firsts:
        results["first run"] = (statistics.median(firsts), first_commands)
    # verification expects the kernel arguments active: boot the nodes into them first
    for index in range(1, nodes + 1):
        lab("reboot", f"node{index}")
    for name in (row for row in RUNS if row in rows and row != "first run"):
        times = [timed(RUNS[name]) for _ in range(repeat)]
        print(f"{nodes} nodes, {name}: {', '.join(f'{t:.2f}' for t in times)}", file=sys.stderr)
        results[name] = (statistics.median(times), commands_per_node(RUNS[name]))
    return results


def _cell(seconds: float, commands: int) -> str:
    return f"{seconds:.2f} ({commands if commands >= 0 else '-'})"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", nargs="+", choices=list(RUNS), default=list(RUNS))
    args = parser.parse_args(argv)
    table = {n: measure(n, args.repeat, args.only) for n in args.nodes}
    lab("down")
    header = " | ".join(f"{n} nodes: s (cmds/node)" for n in args.nodes)
    print(f"| run | {header} |")
    print("|---|" + "---|" * len(args.nodes))
    for run in (row for row in RUNS if row in args.only):
        cells = " | ".join(_cell(*table[n][run]) for n in args.nodes)
        print(f"| {run} | {cells} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
