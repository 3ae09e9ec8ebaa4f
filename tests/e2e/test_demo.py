"""`make demo SERVE=1` as a new user runs it: it ends with where the cluster is (a URL, a curl line
that works, the status command for the demo's config), and right after it, and after the head's
first SSH to a worker, drift finds nothing to change."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from halo_cluster.roles.launcher.blocks import END
from tests.e2e.conftest import ROOT, Lab

HALO_CLUSTER = str(Path(sys.executable).parent / "halo-cluster")
DEMO_CONFIG = ".lab/cluster-serve.yml"


def run(argv: list[str], timeout: float = 1200) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if k != "CLUSTER_CONFIG"},
    )


@pytest.fixture(scope="module")
def demo() -> subprocess.CompletedProcess:
    """`make demo SERVE=1` on a 2-node lab (kept when one is up: `lab up` keeps a lab of this
    shape, and the deploy is a no-op when it already serves this config), with this virtualenv."""
    Lab(2, "roce").ensure_up()
    return run(["make", "--no-print-directory", "demo", "SERVE=1", f"VENV={sys.prefix}"])


@pytest.mark.serving
def test_demo_ends_with_where_the_cluster_is(demo: subprocess.CompletedProcess) -> None:
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    serving, curl, status = demo.stdout.rstrip().splitlines()[-3:]
    assert serving.startswith("serving facebook/opt-125m at http://192.168.100.1:8000 ")
    assert status == f"status:  halo-cluster status --config {DEMO_CONFIG}"
    # the curl line works as printed, from the project directory
    reply = run(["sh", "-c", curl.removeprefix("try it:  ")], timeout=60)
    assert reply.returncode == 0, reply.stderr
    assert "stand-in" in json.loads(reply.stdout)["choices"][0]["text"]
    # and so does the status command it names (make would turn any failure into 2)
    up = run([HALO_CLUSTER, "status", "--config", DEMO_CONFIG], timeout=120)
    assert up.returncode == 0, up.stdout + up.stderr


@pytest.mark.serving
def test_no_drift_after_the_demo_and_the_heads_first_ssh(
    demo: subprocess.CompletedProcess,
) -> None:
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    lab = Lab(2, "roce")
    # what the upstream launcher does: plain ssh, with OpenSSH's defaults (UpdateHostKeys), which
    # appends the worker's other host keys to known_hosts, after our block
    lab.ssh("node1", "runuser -u vllm -- ssh -o BatchMode=yes 192.168.100.2 true")
    known = lab.ssh("node1", "cat ~vllm/.ssh/known_hosts").splitlines()
    assert known[known.index(END) + 1 :], f"no host key appended after our block: {known}"
    drift = run([HALO_CLUSTER, "drift", "--config", DEMO_CONFIG, "--json-out", os.devnull], 300)
    assert drift.returncode == 0, drift.stdout + drift.stderr[-2000:]
    assert drift.stdout.rstrip().endswith("drift: none, every node is converged")
