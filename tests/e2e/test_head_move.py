"""The head moves with its cluster (issue 34, item 8) on the serving 2-node lab: the config lists
node2 first (each node keeps its data address), the deploy makes node2 the head: it serves on
node2's data address, node1 runs a Ray worker and no vLLM, both run the lock's one digest, the
lock's head is node2 and node2's history holds node1's lines with a `moved-head` line after
them, drift 0. Then back: node1 heads again, drift 0, the lab as the serving tests expect it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from halo_cluster.config import lock as locks
from lab import cli
from tests.e2e.conftest import ROOT, Lab, failure
from tests.e2e.serving_lab import SERVE, user
from tests.e2e.waits import until

HALO_CLUSTER = str(Path(sys.executable).parent / "halo-cluster")
ADDRESS = {"node1": "192.168.100.1", "node2": "192.168.100.2"}
IMAGE = "podman container inspect --format '{{{{.ImageName}}}}' {} 2>/dev/null"
VLLM_UNIT = "~vllm/.config/containers/systemd/halo-vllm.container"


def reversed_config(lab: Lab, order: tuple[str, str] = ("node2", "node1")) -> Path:
    """The serving lab's cluster.yml with its nodes in `order` (the first is the head), each on
    its own data address, beside the lab's lock (the same cluster's folder)."""
    lines = lab.config("reboot: if-needed\n" + SERVE).read_text().splitlines()
    entries = {}
    for name in order:
        start = lines.index(f"  - name: {name}")
        entry = lines[start : start + 3]
        entry[2] = entry[2].replace("}", f", address: {ADDRESS[name]}}}")
        entries[name] = entry
    first = lines.index("nodes:") + 1
    rest = lines[first + 6 :]
    path = cli.LAB_DIR / f"cluster-{order[0]}-head.yml"
    body = [*lines[:first], *(line for n in order for line in entries[n]), *rest]
    path.write_text("\n".join(body) + "\n")
    return path


def halo_cluster(*args: str, config: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, CLUSTER_CONFIG=str(config))
    argv = [HALO_CLUSTER, *args, "--config", str(config)]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def history(lab: Lab, node: str) -> list[str]:
    return user(lab, node, f"cat ~vllm/{locks.HISTORY}").splitlines()


def serving_on(lab: Lab, head: str, timeout: float = 60) -> None:
    """/health answers 200 on `head`'s data address, asked from the other node (the data link)."""
    other = next(n for n in ADDRESS if n != head)
    url = f"http://{ADDRESS[head]}:8000"
    ask = f"curl -s -o /dev/null -m 5 -w '%{{http_code}}' {url}/health"
    until(lambda: lab.ssh(other, ask, check=False) == "200", timeout, f"serving on {url}")


def moved_to(lab: Lab, head: str, before: list[str], config: Path) -> None:
    """The cluster as a deploy that moved its head to `head` leaves it."""
    worker = next(n for n in ADDRESS if n != head)
    serving_on(lab, head)
    lock = json.loads(locks.found(cli.LAB_DIR).read_text())
    assert lock["head"] == head
    pinned = f"{lock['image']['reference'].rsplit(':', 1)[0]}@{lock['image']['current']['digest']}"
    assert user(lab, head, IMAGE.format("halo-ray")).strip() == pinned
    assert user(lab, head, IMAGE.format("halo-vllm")).strip() == pinned
    assert user(lab, worker, IMAGE.format("halo-ray")).strip() == pinned
    assert user(lab, worker, "systemctl --user is-active halo-vllm", check=False).strip() in (
        "inactive",
        "unknown",
    )
    assert user(lab, worker, f"sh -c 'ls {VLLM_UNIT} 2>/dev/null'", check=False).strip() == ""
    carried = history(lab, head)
    assert carried[: len(before)] == before  # the old head's lines, first and whole
    added = [json.loads(line) for line in carried[len(before) :]]
    # and the new head's vLLM, started by the deploy, warmed up there (roles/serve/warmup.py)
    moved = [m for m in added if m["event"] != "warmup"]
    assert [(m["event"], m["from"], m["to"]) for m in moved] == [("moved-head", worker, head)]
    warmed = [m for m in added if m["event"] == "warmup"]
    assert warmed and warmed[-1]["ok"] is True and warmed[-1]["by"].startswith("vllm@"), added
    where = halo_cluster("where", config=config)
    assert where.returncode == 0 and f"http://{ADDRESS[head]}:8000" in where.stdout, where.stdout
    assert f"node {head})" in where.stdout
    drift = halo_cluster("drift", config=config)
    assert drift.returncode == 0, drift.stdout[-3000:] + drift.stderr[-2000:]


def test_the_head_moves_to_node2_and_back(serving: Lab) -> None:
    lab = serving
    before = history(lab, "node1")
    assert before, "the serving lab's head has no history"
    node2_head = reversed_config(lab)
    start = time.monotonic()
    result = lab.deploy(config=node2_head)
    assert result.returncode == 0, failure(result)
    print(f"head moved to node2 in {time.monotonic() - start:.1f} s")
    moved_to(lab, "node2", before, node2_head)

    # back with the serving lab's own config: the lab as the tests after this one find it
    before = history(lab, "node2")
    serving_config = lab.config("reboot: if-needed\n" + SERVE)
    start = time.monotonic()
    result = lab.deploy(config=serving_config)
    assert result.returncode == 0, failure(result)
    print(f"head moved back to node1 in {time.monotonic() - start:.1f} s")
    moved_to(lab, "node1", before, serving_config)
    node2_head.unlink()
