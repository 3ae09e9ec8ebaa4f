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


def pci(address: str, header="00", onboard="", vf="0", ari="0", node="1", link="Ethernet"):
    """The Hardware fact's `pci` line for a function, as its command prints it (by default an
    RDMA device that is a CA over Ethernet: RoCE)."""
    line = f"{address} ari={ari} header={header} vf={vf} onboard={onboard} node={node} link={link}"
    return rdmatools.parse_pci(line)


def nccl_selects(pin: str, rdma_link: str) -> list[str]:
    """The ports of a recorded `rdma link` that NCCL_IB_HCA=`pin` lets RCCL use: NCCL's own
    rules (src/misc/utils.cc parseStringList, matchIf, matchIfList; net_ib.cc takes a leading
    `=` as exact for every entry), written out here as the test's oracle."""
    exact = pin.startswith("=")
    entries = [e.partition(":") for e in pin.removeprefix("=").split(",") if e]
    chosen = []
    for link in rdmatools.parse_rdma_link(rdma_link):
        for name, _, port in entries:
            same = link["device"] == name if exact else link["device"].startswith(name)
            if same and (not port or port == link["port"]):
                chosen.append(f"{link['device']}/{link['port']}")
    return chosen


@pytest.mark.parametrize(
    ("function", "name"),
    [
        # the fixtures' E810 port enp194s0np0: bus 0xc2, one function (no f in its netdev name)
        (pci("0000:c2:00.0"), "rocep194s0"),
        # the legacy recording's enp23s0f1: bus 0x17, function 1
        (pci("0000:17:00.1"), "rocep23s0f1"),
        # function 0 of a multi-function device (header type bit 7) keeps its f0
        (pci("0000:17:00.0", header="80"), "rocep23s0f0"),
        # a PCI domain above 0 leads with P; the slot is decimal
        (pci("0001:0a:1f.2"), "roceP1p10s31f2"),
        # ARI: slot and function are one function number
        (pci("0000:17:01.2", ari="1"), "rocep23s1f10"),
        # the firmware's onboard index first, as NAME_FALLBACK tries it
        (pci("0000:17:00.1", onboard="3"), "roceo3"),
        # an index above rdma_rename's bound falls back to the PCI location
        (pci("0000:17:00.1", onboard="16384"), "rocep23s0f1"),
        # irdma in iWARP mode is an RNIC (node type 4): rdma_rename's iw prefix
        (pci("0000:17:00.1", node="4"), "iwp23s0f1"),
        # a VF (named after its PF and VF number), no RDMA device read, no PCI function: none
        (pci("0000:17:02.0", vf="1"), None),
        (pci("0000:17:00.1", node="", link=""), None),
        (rdmatools.parse_pci(""), None),
    ],
)
def test_persistent_name_as_rdma_rename_gives_it(function, name) -> None:
    assert rdmatools.persistent_name(function) == name


def test_the_pin_finds_the_port_before_the_rename_in_the_recorded_legacy_names() -> None:
    # before rdma-core: enp23s0f1's device is irdma1 (recorded); its PCI function 0000:17:00.1
    names = ["irdma1", rdmatools.persistent_name(pci("0000:17:00.1"))]
    pin = rdmatools.hca_pin(names)
    assert pin == "=irdma1:1,rocep23s0f1:1"
    legacy = fixture("rdma-link-irdma-legacy-names.txt")
    assert nccl_selects(pin, legacy) == ["irdma1/1"]  # not irdma0, the other port
    assert nccl_selects("=irdma0:1", legacy) == ["irdma0/1"]  # the oracle tells them apart


def test_the_pin_finds_the_port_after_the_rename_in_a_recorded_persistent_name() -> None:
    # a recorded device under its persistent name (not an E810: none was found recorded):
    # rocep68s0 on netdev enp68s0, PCI 0000:44:00.0; seen as the kernel's irdma0 before the boot
    renamed = fixture("rdma-link-rocep68s0-amd-host-device.txt")
    later = rdmatools.persistent_name(pci("0000:44:00.0"))
    assert later == "rocep68s0" == rdmatools.parse_rdma_link(renamed)[0]["device"]
    pin = rdmatools.hca_pin(["irdma0", later])
    assert nccl_selects(pin, renamed) == ["rocep68s0/1"]
    # the pin of the kernel's name alone, as before, finds nothing after the boot
    assert nccl_selects(rdmatools.hca_pin(["irdma0"]), renamed) == []


def test_a_bad_pci_line_is_no_function() -> None:
    assert rdmatools.parse_pci("c2:00.0 ari=0") is None
    assert rdmatools.parse_pci("0000:c2:00.0")["multifunction"] is False


def test_the_node_pins_one_name_once_the_device_carries_its_persistent_one() -> None:
    from halo_cluster.node.context import NodeContext
    from halo_cluster.node.environment import node_hca
    from halo_cluster.node.facts import Hardware

    line = "0000:c2:00.0 ari=0 header=00 vf=0 onboard= node=1 link=Ethernet"
    before = NodeContext("enp194s0np0", {}, Hardware.default() | {"rdma": ["irdma1"], "pci": line})
    after = NodeContext("enp194s0np0", {}, before.hardware | {"rdma": ["rocep194s0"]})
    assert node_hca(before) == "=irdma1:1,rocep194s0:1"
    assert node_hca(after) == "=rocep194s0:1"
    # no PCI function read (a lab node, a container): the current name alone
    assert node_hca(NodeContext("x", {}, Hardware.default() | {"rdma": ["irdma1"]})) == "=irdma1:1"
