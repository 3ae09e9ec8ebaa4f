"""RDMA output parsers against outputs recorded on real hosts."""

from __future__ import annotations

import pytest

from halo_cluster.decide import rdmatools
from tests.recorded import fixture


def test_rdma_link_legacy_irdma_names() -> None:
    links = rdmatools.parse_rdma_link(fixture("rdma-link-irdma-legacy-names.txt"))
    assert links == [
        {
            "device": "irdma0",
            "port": "1",
            "state": "DOWN",
            "physical_state": "DISABLED",
            "netdev": "enp23s0f0",
        },
        {
            "device": "irdma1",
            "port": "1",
            "state": "ACTIVE",
            "physical_state": "LINK_UP",
            "netdev": "enp23s0f1",
        },
    ]


def test_rdma_link_native_ib_with_extra_fields() -> None:
    links = rdmatools.parse_rdma_link(fixture("rdma-link-ib-mlx4-strix-halo-fedora43.txt"))
    assert [
        (x["device"], x["port"], x["state"], x["physical_state"], x["netdev"]) for x in links
    ] == [
        ("ibp195s0", "1", "ACTIVE", "LINK_UP", "ibp195s0"),
        ("ibp195s0", "2", "DOWN", "POLLING", "ibp195s0d1"),
    ]


def test_rdma_link_current_naming_as_documented() -> None:
    # field-notes.md: the current naming, as iproute2 prints it
    line = "link rocep1s0f0/1 state ACTIVE physical_state LINK_UP netdev enp1s0f0np0"
    (link,) = rdmatools.parse_rdma_link(line)
    assert (link["device"], link["netdev"], link["state"]) == (
        "rocep1s0f0",
        "enp1s0f0np0",
        "ACTIVE",
    )


def test_ibv_devinfo_port_state_and_roce_v2_gid() -> None:
    devinfo = fixture("ibv_devinfo-v-irdma-e810.txt")
    assert rdmatools.port_state(devinfo) == "PORT_ACTIVE"
    assert rdmatools.roce_v2_gid_index(devinfo, "10.22.116.221") == 1
    assert rdmatools.roce_v2_gid_index(devinfo, "192.168.100.1") is None


@pytest.mark.parametrize(
    ("name", "typical", "avg"),
    [
        ("ib_write_lat-fragment-strix-halo-ib.txt", 1.11, 1.12),
        ("ib_write_lat-dgx-spark-rocep.txt", 1.47, 1.47),
    ],
)
def test_latency(name: str, typical: float, avg: float) -> None:
    result = rdmatools.parse_latency(fixture(name))
    assert result["t_typical"] == typical
    assert result["t_avg"] == avg
    assert "t_min" in result and "t_max" in result


@pytest.mark.parametrize(
    ("name", "gbps"),
    [
        ("ib_write_bw-irdma-e810-MBsec.txt", 1103.38 * 1048576 * 8 / 1e9),
        ("ib_write_bw-MiBsec-fragment-strix-halo-ib.txt", 3293.56 * 1048576 * 8 / 1e9),
        ("ib_write_bw-gbits-dgx-spark-rocep.txt", 111.71),
    ],
)
def test_bandwidth_units(name: str, gbps: float) -> None:
    assert rdmatools.parse_bandwidth_gbps(fixture(name)) == pytest.approx(gbps)


def test_no_result_table() -> None:
    assert rdmatools.parse_latency("Couldn't connect to 192.168.100.2:18515") is None
    assert rdmatools.parse_bandwidth_gbps("") is None


def test_the_devices_ibv_devices_lists() -> None:
    assert rdmatools.ibv_devices(fixture("ibv_devices-irdma-e810.txt")) == ["irdma0", "irdma1"]
    assert rdmatools.ibv_devices("    device                 node GUID\n    ------   ----\n") == []
