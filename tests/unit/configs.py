"""Valid cluster.yml documents and the helpers that load them, shared by the config tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from halo_cluster.config.loader import ConfigError, load_cluster

VALID_ROCE = """\
cluster_user: vllm
nodes:
  - {name: halo1, ssh: {host: 10.0.0.11}, data: {interface: enp1s0f0np0}}
  - {name: halo2, ssh: {host: 10.0.0.12}, data: {mac: "AA:bb:cc:dd:ee:02"}}
"""

VALID_TB = """\
interconnect: thunderbolt
cluster_user: vllm
nodes:
  - {name: a, ssh: {host: 10.0.0.11}}
  - {name: b, ssh: {host: 10.0.0.12}}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cluster.yml"
    path.write_text(text)
    return path


def problems(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_cluster(write(tmp_path, text))
    return info.value.problems
