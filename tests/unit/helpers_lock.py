"""A two-node config parsed beside a folder, where a test lays out a lock: shared by the lock's
tests (test_lock.py) and the upgrade's (test_upgrade.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from halo_cluster.config.loader import ConfigError, parse_cluster

CONFIG = (
    "cluster_user: vllm\nnodes:\n"
    "  - {name: halo1, ssh: {host: 10.0.0.11}, data: {interface: auto}}\n"
    "  - {name: halo2, ssh: {host: 10.0.0.12}, data: {interface: auto}}\n"
)


def load(folder: Path, extra: str = ""):
    return parse_cluster(yaml.safe_load(extra + CONFIG), base_dir=folder)


def problems(folder: Path, extra: str = "") -> list[str]:
    with pytest.raises(ConfigError) as raised:
        load(folder, extra)
    return raised.value.problems
