"""The image upgrade's downtime and the time to roll back on the built-in lab: a script that
prints numbers, not a test (docs/performance.md).

    .venv/bin/python -m bench.upgrade [--repeat 3] [--launcher ray|native]    (at the checkout's
    top: lab/ is not installed)

On the serving 2-node lab (`serve.ready_timeout: 60`): a good build published, `halo-cluster
upgrade` (its printed downtime: seconds without a 200 from /health, and its whole time, the pull
included), then `halo-cluster rollback` (its time); then a broken build published and the
upgrade's time until it exits 6, serving the previous build again; and the goal's measure, one
restart of the services in the deploy's order until /health answers 200: with Ray, vLLM
stopped, the workers' Ray stopped, the head's Ray restarted, the workers' started, vLLM started;
with `native` every rank stopped, then every rank started. Median of --repeat runs. Needs root,
like the lab.
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

from bench.serve import served
from lab import cli, faults

ROOT = Path(__file__).resolve().parents[1]
HALO_CLUSTER = str(Path(sys.executable).parent / "halo-cluster")
DOWNTIME = re.compile(r"downtime: ([0-9.]+) s without a 200")
# one restart of the services as the deploy orders it (roles/serve/ray.py, roles/serve/ranks.py)
RESTART = {
    "ray": (
        ("node1", "stop", "halo-vllm"),
        ("node2", "stop", "halo-ray"),
        ("node1", "restart", "halo-ray"),
        ("node2", "start", "halo-ray"),
        ("node1", "start", "halo-vllm"),
    ),
    "native": (
        ("node1", "stop", "halo-vllm"),
        ("node2", "stop", "halo-vllm"),
        ("node1", "start", "halo-vllm"),
        ("node2", "start", "halo-vllm"),
    ),
}


def config(launcher: str) -> Path:
    serve = served(launcher).replace("ready_timeout: 300", "ready_timeout: 60")
    path = cli.LAB_DIR / "cluster-bench.yml"
    path.write_text(cli.CONFIG.read_text() + "reboot: if-needed\n" + serve)
    return path


def timed(command: str, path: Path, expect: int) -> tuple[float, str]:
    start = time.monotonic()
    result = subprocess.run(
        [HALO_CLUSTER, command, "--config", str(path)],
        cwd=ROOT,
        env=dict(os.environ, CLUSTER_CONFIG=str(path)),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    if result.returncode != expect:
        raise SystemExit(
            f"{command}: exit {result.returncode}, not {expect}: {result.stdout[-2000:]}"
        )
    return time.monotonic() - start, result.stdout


def until_serving(timeout: float = 300) -> None:
    start = time.monotonic()
    while faults.health() != "200":
        if time.monotonic() - start > timeout:
            raise SystemExit(f"not serving after {timeout:.0f} s")
        time.sleep(0.5)


def services_restart(launcher: str) -> float:
    """Seconds from vLLM's stop to /health 200, the services restarted as the deploy does."""
    until_serving()
    start = time.monotonic()
    for node, verb, service in RESTART[launcher]:
        faults.user(node, f"systemctl --user {verb} {service}")
    until_serving()
    return time.monotonic() - start


def one_round(path: Path, launcher: str) -> dict[str, float]:
    figures = {"one restart of the services (s)": services_restart(launcher)}
    cli.publish_image()
    took, output = timed("upgrade", path, 0)
    found = DOWNTIME.search(output)
    figures["upgrade (s)"] = took
    figures["downtime (s)"] = float(found.group(1)) if found else float("nan")
    figures["rollback by hand (s)"], _ = timed("rollback", path, 0)
    cli.publish_image("broken")
    figures["broken build to serving again (s)"], _ = timed("upgrade", path, 6)
    cli.publish_image()  # `latest` good again, for the next round and the other tests
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--launcher", choices=tuple(RESTART), default="ray")
    args = parser.parse_args()
    path = config(args.launcher)
    deploy = subprocess.run([HALO_CLUSTER, "deploy", "--config", str(path), "-y"], cwd=ROOT)
    if deploy.returncode != 0:
        raise SystemExit("the serving lab did not converge: python -m lab up, then retry")
    rounds = [one_round(path, args.launcher) for _ in range(args.repeat)]
    print(f"launcher: {args.launcher}")
    for name in rounds[0]:
        values = [r[name] for r in rounds]
        shown = ", ".join(f"{v:.1f}" for v in values)
        print(f"{name}: median {statistics.median(values):.1f} ({shown})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
