"""The NCCL/RCCL transport parser on lines recorded from real runs (tests/plan/fixtures/nccl-*,
sources in shared/reference/recorded/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

from halo_cluster.decide import nccl

FIXTURES = Path(__file__).resolve().parents[1] / "plan" / "fixtures"


def recorded(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_rccl_over_roce_under_ray_is_ib_on_its_device() -> None:
    found = nccl.parse(recorded("nccl-rccl-roce-strix-halo-toolbox-ray.txt"))
    assert found.transport == nccl.IB and found.rdma
    assert found.devices == ["rocep3s0f0"]
    assert "via NET/IB/0 comm 0x2035d540 nRanks 02" in found.evidence


def test_nccl_over_roce_using_network_ib() -> None:
    found = nccl.parse(recorded("nccl-roce-using-network-ib.txt"))
    assert found.transport == nccl.IB
    assert found.devices == ["mlx5_10", "mlx5_11"]


def test_rccl_over_infiniband_names_no_transport_without_a_channel_or_network_line() -> None:
    found = nccl.parse(recorded("nccl-rccl-infiniband-using.txt"))
    assert found.transport is None  # `NET/IB : Using` alone decides nothing
    assert found.devices == ["mlx5_3", "mlx5_2", "mlx5_1", "mlx5_0"]


def test_socket_fallback_is_sockets() -> None:
    found = nccl.parse(recorded("nccl-socket-fallback.txt"))
    assert found.transport == nccl.SOCKET and not found.rdma
    assert found.evidence.endswith("[send] via NET/Socket/0")


def test_net_socket_using_alone_does_not_mean_sockets() -> None:
    lines = recorded("nccl-socket-fallback.txt").splitlines()[1]  # NET/Socket : Using [0]ens3
    roce = recorded("nccl-roce-using-network-ib.txt")
    found = nccl.parse(lines + "\n" + roce)
    assert found.transport == nccl.IB


def test_ray_repeat_suffix_and_old_channel_format() -> None:
    line = recorded("nccl-socket-fallback.txt").splitlines()[-1]
    found = nccl.parse(f"(RayWorkerProc pid=7) {line} [repeated 3x across cluster]")
    assert found.transport == nccl.SOCKET
