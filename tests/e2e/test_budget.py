"""The memory budget in the lab: a model whose weight files are sparse ("280 GB" in a few KB of
disk, lab/hub.py) is refused by the deploy's fit estimate (roles/serve/fit.py: its config.json
and the weights' sizes in the head's cache) before any node changes, with the numbers, and the
small model passes. The lab's nodes see their host's memory: the memory sum is NOT VERIFIED
there; the weights are weighed against the GTT kernel.gtt_gib gives (124)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from halo_cluster.roles.serve.budget import PAGE
from lab import hub
from tests.e2e.conftest import ROOT, Lab, failure
from tests.e2e.serving_lab import SERVE, health, user, wait_serving

HALO_CLUSTER = str(Path(sys.executable).parent / "halo-cluster")
STARTED = "podman inspect -f '{{.State.StartedAt}}' halo-vllm"


def ensure_sparse_model(lab: Lab) -> None:
    """The sparse model in every node's cache, as lab/hub.py seeds it at `lab up` (a lab made
    before it existed lacks it): the same layout, sparse files made with truncate."""
    repo = f"~vllm/.cache/huggingface/hub/models--{hub.SPARSE.replace('/', '--')}"
    snapshot = f"{repo}/snapshots/{hub.COMMIT}"
    lines = [
        f"mkdir -p {repo}/blobs {repo}/refs {snapshot}",
        f"printf %s {hub.COMMIT} > {repo}/refs/main",
    ]
    for name, size in hub.sparse_files().items():
        lines += [
            f"truncate -s {size} {repo}/blobs/{name}",
            f"ln -sfn ../../blobs/{name} {snapshot}/{name}",
        ]
    lines.append("chown -R vllm: ~vllm/.cache/huggingface")
    for node in lab.nodes:
        if not lab.ssh(node, f"ls {snapshot}/*.safetensors 2>/dev/null", check=False).strip():
            lab.ssh(node, " && ".join(lines))


def test_a_sparse_280_gb_model_is_refused_then_the_small_one_serves(serving: Lab) -> None:
    lab = serving
    ensure_sparse_model(lab)
    started = user(lab, "node1", STARTED)
    large = lab.config("reboot: if-needed\n" + SERVE.replace(hub.MODEL, hub.SPARSE))
    result = lab.deploy(config=large)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]
    # 8 files of 35 GB = 260.8 GiB, over TP 2: 130.4 GiB per node, more than vLLM may take
    # (kernel.gtt_gib 124 x 0.9): every node refused in its preflight, before any operation
    assert (
        f"serve.model: '{hub.SPARSE}' cannot fit at TP 2 x PP 1: weights 130.4 GiB per node"
    ) in output, output[-3000:]
    assert "vLLM may take 111.6 GiB per node (the weights are more than 90%" in output
    for node in lab.nodes:
        assert f"[{node}] refused: " in output, output[-3000:]
    assert "memory budget: vLLM not started" not in output  # refused before the serve role
    assert "Start halo-vllm" not in output and "Restart halo-vllm" not in output
    # the running vLLM kept its model: not restarted, its start script not rewritten
    assert user(lab, "node1", STARTED) == started
    start = lab.ssh("node1", "cat ~vllm/.config/halo-cluster/vllm-start.sh")
    assert f"vllm serve {hub.MODEL} " in start and hub.SPARSE not in start
    assert health(lab) == "200"
    # make status: the same table, every node's row, the refusal and NOT VERIFIED
    status = subprocess.run(
        [HALO_CLUSTER, "status", "--config", str(large)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert f"memory budget ({PAGE}):" in status.stdout, status.stdout + status.stderr
    rows = [line.split() for line in status.stdout.splitlines() if line.startswith("node")]
    assert {row[0] for row in rows if row[-1] == "FAIL"} >= set(lab.nodes), status.stdout
    assert "node2: memory NOT VERIFIED: a container sees its host's MemTotal" in status.stdout

    small = lab.deploy(config=lab.config("reboot: if-needed\n" + SERVE))
    assert small.returncode == 0, failure(small)
    assert "memory budget: vLLM not started" not in small.stdout + small.stderr
    assert f"memory budget ({PAGE}):" in small.stdout + small.stderr
    wait_serving(lab)
