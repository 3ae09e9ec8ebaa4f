"""Hardware checks, where the hardware exists: RDMA port state, RoCE v2 GID, perftest latency and
bandwidth between head and worker, Thunderbolt link speed. NOT VERIFIED where it cannot exist."""

from __future__ import annotations

import pytest

from halo_cluster.decide import flowcontrol, preflight, rdmatools
from halo_cluster.node.thunderbolt import thunderbolt_links, thunderbolt_links_command

from .target import Target

PERFTEST = "timeout 60 {tool} -d {device} -x {gid} -F {extra}"


def roce_only(node: Target) -> None:
    if node.cluster.interconnect != "roce":
        pytest.skip("thunderbolt: no RDMA by design")


def rdma_device(node: Target) -> str:
    node.not_verified("RDMA device")
    devices = node.run(f"ls /sys/class/net/{node.interface}/device/infiniband").stdout.split()
    assert devices, (
        f"{node.name}: {node.interface} has no RDMA device: modprobe irdma, check "
        "`rdma link` and the E810 firmware"
    )
    return devices[0]


def gid_index(node: Target, device: str) -> int:
    devinfo = node.out(f"ibv_devinfo -v -d {device}")
    index = rdmatools.roce_v2_gid_index(devinfo, node.node.address)
    assert index is not None, (
        f"{node.name}: no RoCE v2 GID for {node.node.address} on {device}: "
        "is the address on the E810 port?"
    )
    return index


def test_rdma_link_active(node: Target, measured) -> None:
    roce_only(node)
    rdma_device(node)
    links = rdmatools.parse_rdma_link(node.out("rdma link show"))
    link = next((x for x in links if x["netdev"] == node.interface), None)
    assert link, f"{node.name}: `rdma link` shows no port for {node.interface}"
    assert (link["state"], link["physical_state"]) == ("ACTIVE", "LINK_UP"), (
        f"{node.name}: {link['device']}/{link['port']} is {link['state']} "
        f"{link['physical_state']}, expected ACTIVE LINK_UP: check the cable and the peer"
    )
    measured(f"{link['device']}/{link['port']} ACTIVE LINK_UP")


def test_ibv_port_active(node: Target) -> None:
    roce_only(node)
    device = rdma_device(node)
    state = rdmatools.port_state(node.out(f"ibv_devinfo -v -d {device}"))
    assert state == "PORT_ACTIVE", f"{node.name}: {device} port 1 is {state}"


def test_image_rdma_core_sees_the_device(node: Target, measured) -> None:
    """The image brings its own rdma-core (kyuz0's v62 overlay: Ubuntu's 50 failed against the
    host's irdma, its docs/VLLM_PATCH_MANIFEST.md): RCCL in it must list the host's device."""
    roce_only(node)
    device = rdma_device(node)
    listed = rdmatools.ibv_devices(node.out(node.in_toolbox("ibv_devices")))
    assert device in listed, (
        f"{node.name}: the image's rdma-core lists {listed or 'no device'}, not {device}: its "
        "libibverbs has no provider for the host's irdma; use an image with rdma-core 62 or newer"
    )
    measured(f"{device} listed inside the image")


def test_roce_v2_gid(node: Target, measured) -> None:
    roce_only(node)
    device = rdma_device(node)
    measured(f"GID index {gid_index(node, device)}")


def perftest(head: Target, worker: Target, tool: str, extra: str = "") -> str:
    server_dev, client_dev = rdma_device(worker), rdma_device(head)
    server = PERFTEST.format(
        tool=tool, device=server_dev, gid=gid_index(worker, server_dev), extra=extra
    )
    worker.run(f"nohup {server} > /tmp/halo-{tool}.log 2>&1 &")
    client = PERFTEST.format(
        tool=tool,
        device=client_dev,
        gid=gid_index(head, client_dev),
        extra=f"{extra} {worker.node.address}",
    )
    for _ in range(10):
        result = head.run(client)
        if result.rc == 0:
            return result.stdout
        head.run("sleep 0.5")
    raise AssertionError(f"{head.name} -> {worker.name}: {tool} failed: {result.stderr.strip()}")


def test_rdma_latency(head: Target, worker: Target, measured) -> None:
    roce_only(head)
    output = perftest(head, worker, "ib_write_lat", "-I 96")
    result = rdmatools.parse_latency(output)
    assert result, f"{tool_output_problem(output)}"
    typical, limit = result["t_typical"], head.cluster.max_latency_us
    measured(f"{typical} us typical")
    assert typical <= limit, (
        f"{head.name} -> {worker.name}: latency {typical} us, expected at "
        f"most {limit}: check flow control, firmware and the riser"
    )


def test_rdma_bandwidth(head: Target, worker: Target, measured) -> None:
    roce_only(head)
    output = perftest(head, worker, "ib_write_bw", "--report_gbits")
    gbps = rdmatools.parse_bandwidth_gbps(output)
    assert gbps is not None, tool_output_problem(output)
    measured(f"{gbps:.1f} Gb/s")
    limit = head.cluster.min_bandwidth_gbps
    assert gbps >= limit, (
        f"{head.name} -> {worker.name}: {gbps:.1f} Gb/s, expected at least "
        f"{limit}: check the PCIe link width (x4 riser) and MTU"
    )


def test_flow_control(node: Target, measured) -> None:
    """Link-level flow control on the E810 port, as `ethtool -a` reports it (the dispatcher
    script sets it: NetworkManager's own pause settings are refused by ice on a DAC link)."""
    roce_only(node)
    node.not_verified("flow control (the lab's veth has no pause support)")
    problem = node.flow_control_problem()
    assert problem is None, problem
    measured(f"{node.interface} {flowcontrol.describe(node.pause)}")


def tool_output_problem(output: str) -> str:
    return f"no result table in perftest output: {output.strip().splitlines()[-1:]}"


def test_thunderbolt_link_speed(node: Target, measured) -> None:
    """The host-to-host link's own speed (the XDomain behind the data interface), as the
    preflight check reads it: never the fastest device on the bus (a dock can be faster)."""
    if node.cluster.interconnect != "thunderbolt":
        pytest.skip("roce: no thunderbolt link by design")
    node.not_verified("Thunderbolt link speed")
    links = thunderbolt_links(node.run(thunderbolt_links_command()).stdout.splitlines())
    check = preflight.thunderbolt(links, node.interface, False, "")
    assert check.status == preflight.OK, f"{node.name}: {check.detail}"
    measured(check.detail)
