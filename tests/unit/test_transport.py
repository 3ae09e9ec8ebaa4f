"""`serve.transport`: the config's default and refusal, and the decision whether vLLM may start
with rdma, on `rdma link` outputs recorded on real hosts (E810 legacy names, ConnectX-3 IB)."""

from __future__ import annotations

from pathlib import Path

import pytest

from halo_cluster.config.loader import load_cluster
from halo_cluster.decide.rdmatools import parse_rdma_link
from halo_cluster.roles.serve.transport import FIX, rdma_port_problem
from tests.recorded import fixture
from tests.unit.configs import VALID_ROCE, VALID_TB, problems, write

E810 = parse_rdma_link(fixture("rdma-link-irdma-legacy-names.txt"))  # irdma0 DOWN, irdma1 ACTIVE
MLX4 = parse_rdma_link(fixture("rdma-link-ib-mlx4-strix-halo-fedora43.txt"))  # port 2 DOWN


def test_an_active_port_found_by_its_device_passes() -> None:
    assert rdma_port_problem("enp194s0np0", "irdma1", E810) is None


def test_an_active_port_found_by_its_netdev_passes() -> None:
    assert rdma_port_problem("enp23s0f1", None, E810) is None
    assert rdma_port_problem("ibp195s0", None, MLX4) is None


def test_a_down_port_names_the_port_its_state_and_the_fix() -> None:
    assert rdma_port_problem("enp194s0np0", "irdma0", E810) == (
        f"enp194s0np0 has no ACTIVE RDMA device (irdma0 state DOWN, physical_state DISABLED): {FIX}"
    )
    down = rdma_port_problem("ibp195s0d1", None, MLX4)
    assert down and "(ibp195s0 state DOWN, physical_state POLLING)" in down


@pytest.mark.parametrize(
    ("device", "links", "named"),
    [
        ("irdma2", E810, " (irdma2 not in `rdma link`)"),
        ("irdma1", [], " (irdma1 not in `rdma link`)"),
        (None, E810, ""),  # no device in sysfs and no link on the port's netdev
    ],
)
def test_a_missing_device_is_refused(device, links, named) -> None:
    problem = rdma_port_problem("enp194s0np0", device, links)
    assert problem == f"enp194s0np0 has no RDMA device{named}: {FIX}"
    assert "serve.transport: sockets" in problem


def test_nothing_is_judged_while_the_drivers_load() -> None:
    assert rdma_port_problem("enp194s0np0", None, [], drivers_loading=True) is None


def test_the_default_follows_the_interconnect(tmp_path: Path) -> None:
    assert load_cluster(write(tmp_path, VALID_ROCE)).serve.transport == "rdma"
    assert load_cluster(write(tmp_path, VALID_TB)).serve.transport == "sockets"
    sockets = VALID_ROCE + "serve: {transport: sockets}\n"
    assert load_cluster(write(tmp_path, sockets)).serve.transport == "sockets"


def test_rdma_on_thunderbolt_is_one_line_naming_the_key(tmp_path: Path) -> None:
    found = problems(tmp_path, VALID_TB + "serve: {transport: rdma}\n")
    assert found == [
        f"{tmp_path / 'cluster.yml'}: serve.transport: rdma needs interconnect: roce "
        "(thunderbolt has no RDMA): use sockets"
    ], found


def test_only_rdma_or_sockets(tmp_path: Path) -> None:
    found = problems(tmp_path, VALID_ROCE + "serve: {transport: tcp}\n")
    assert any("serve.transport" in p and "rdma, sockets" in p for p in found), found


@pytest.mark.parametrize("name", ["NCCL_NET", "NCCL_IB_DISABLE"])
def test_serve_env_cannot_unpin_the_transport(tmp_path: Path, name: str) -> None:
    found = problems(tmp_path, VALID_ROCE + f"serve: {{env: {{{name}: Socket}}}}\n")
    assert any(name in p and "serve.transport" in p for p in found), found
