"""The installed tool against a lab, as the e2e tests run it: the `halo-cluster` command with a
lab's config, the cluster's digest in the lab's lock, and the image the lab's containers run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from halo_cluster.config.loader import load_cluster
from tests.e2e.conftest import ROOT

HALO_CLUSTER = str(Path(sys.executable).parent / "halo-cluster")
NAME = "docker.io/kyuz0/vllm-therock-gfx1151"
INSPECT = "podman container inspect --format '{{.ImageName}}' halo-ray"


def cluster_digest(config: Path) -> str:
    return load_cluster(config).container.digest


def run(argv: list[str], config: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """`argv` from the checkout's top with `config` as the tools' config."""
    env = dict(os.environ, CLUSTER_CONFIG=str(config))
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
