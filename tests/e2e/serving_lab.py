"""The serving lab as the serve e2e tests read it: its config, the head's address, vLLM's
/health and the cluster user's commands and journal."""

from __future__ import annotations

from pathlib import Path

import yaml

from halo_cluster.node.facts import as_user
from tests.e2e.conftest import ROOT, Lab
from tests.e2e.waits import until

SERVE = (ROOT / "lab" / "serve.yml").read_text()
HEAD = "192.168.100.1"
THREE = ["node1", "node2", "node3"]  # the 4-node lab's first three nodes, a cluster of their own
USER = as_user("vllm", "")


def health(lab: Lab, url: str = f"http://{HEAD}:8000") -> str:
    return lab.ssh("node1", f"curl -s -o /dev/null -m 5 -w '%{{http_code}}' {url}/health", False)


# the deploy's own wait for vLLM's engine and /health (lab/serve.yml's serve.ready_timeout)
READY_TIMEOUT = float(yaml.safe_load(SERVE)["serve"]["ready_timeout"])


def wait_serving(lab: Lab, timeout: float = READY_TIMEOUT) -> float:
    """Seconds until /health answers 200 on the head's data address."""

    def last_lines() -> str:
        journal = lab.ssh("node1", f"{USER} journalctl --user -n 40 --no-pager -q", check=False)
        return f"serving (/health 200):\n{journal[-3000:]}"

    return until(lambda: health(lab) == "200", timeout, last_lines)[1]


def user(lab: Lab, node: str, command: str, check: bool = True) -> str:
    return lab.ssh(node, f"{USER} {command}", check=check)


def journal(lab: Lab, service: str) -> str:
    return user(lab, "node1", f"journalctl --user -u {service} -o cat --no-pager", check=False)


def pipeline(lab: Lab, members: list[str], serve: str = SERVE) -> Path:
    """The lab's cluster.yml serving TP 1 x PP len(`members`) (`serve`: the serve section,
    the lab's by default), with those nodes' entries only."""
    # the serve section's own keys: other sections (metrics:) have an `enabled` too
    serve = serve.replace(
        "\nserve:\n",
        f"\nserve:\n  tensor_parallel_size: 1\n  pipeline_parallel_size: {len(members)}\n",
        1,
    )
    path = lab.config(serve)
    lines = path.read_text().splitlines()
    for name in lab.nodes:
        if name not in members:
            start = lines.index(f"  - name: {name}")
            lines = lines[:start] + lines[start + 3 :]
    path.write_text("\n".join(lines) + "\n")
    return path
