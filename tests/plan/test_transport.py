"""`serve.transport` planned on recorded outputs: with rdma RCCL is pinned to IB and vLLM is
withheld while the data port's RDMA device is missing or DOWN (`rdma link` recorded on an E810,
legacy names: irdma0/1 DOWN/DISABLED, irdma1/1 ACTIVE/LINK_UP); with sockets the choice is
written out and nothing is read."""

from __future__ import annotations

from pyinfra.context import ctx_state

from halo_cluster.node import report
from tests.plan.harness import fact_reads, plan
from tests.plan.nodes import (
    CONFIG,
    RDMA_LINKS,
    plan_cluster,
    serve_cluster,
    strix_halo_hardware,
    user_node,
)

START_VLLM = "Cluster services | Start halo-vllm"
START_RAY = "Cluster services | Start halo-ray"
WAIT = "Cluster services | Wait for vLLM's /health"


def env_lines(result, node: str = "halo1") -> list[str]:
    return result.uploads(node)[f"{CONFIG}/serve.env"].splitlines()


def test_rdma_is_the_roce_default_and_pins_rccl_to_ib() -> None:
    result = plan_cluster(serve_cluster())
    for node in ("halo1", "halo2"):
        env = env_lines(result, node)
        pinned = "NCCL_IB_HCA==irdma1:1,rocep194s0:1"
        assert {"NCCL_NET=IB", "NCCL_IB_DISABLE=0", pinned} <= set(env)
        assert "NCCL_NET=Socket" not in env
    assert result.refused == {}
    assert START_VLLM in result.names("halo1") and WAIT in result.names("halo1")
    # the port's state comes with the node's other reads: still one command
    (read,) = fact_reads(result, "halo1")
    assert "rdma link show" in read


def refused_head(**head):
    cluster = serve_cluster()
    return plan(cluster, {"halo1": user_node(**head), "halo2": user_node()})


def test_a_down_rdma_port_withholds_vllm_and_fails_the_head() -> None:
    # the head's data port is irdma0's: DOWN/DISABLED in the recorded `rdma link`
    result = refused_head(rdma="irdma0")
    # vLLM's files are not written either: a restart by systemd cannot start what was refused
    assert not any(p.endswith("vllm-start.sh") for p in result.uploads("halo1"))
    assert result.refused == {
        "halo1": "enp194s0np0 has no ACTIVE RDMA device (irdma0 state DOWN, physical_state "
        "DISABLED): check the cable and `rdma link` on the node, or set serve.transport: sockets"
    }
    names = result.names("halo1")
    assert START_VLLM not in names and WAIT not in names
    assert START_RAY in names  # Ray may run: the node's files and Ray are still converged
    assert f"{CONFIG}/serve.env" in result.uploads("halo1")
    assert START_VLLM not in result.names("halo2") and START_RAY in result.names("halo2")


def test_a_missing_rdma_device_withholds_vllm() -> None:
    for links in ([], [line for line in RDMA_LINKS if "irdma1/" not in line]):
        result = refused_head(rdma_links=links)
        assert result.refused["halo1"].startswith(
            "enp194s0np0 has no RDMA device (irdma1 not in `rdma link`): check the cable"
        ), result.refused
        assert START_VLLM not in result.names("halo1")


def test_the_refused_node_fails_the_run_but_stays_in_it(monkeypatch) -> None:
    """In the failed hosts (pyinfra exits 1), still active (its Ray and files are applied)."""
    import halo_cluster.roles.serve as serve

    seen = []

    def fail(host, reason):
        report.fail(host, reason)
        state = ctx_state.get()
        seen.append((host in state.failed_hosts, host in state.active_hosts))

    monkeypatch.setattr(serve, "fail", fail)
    refused_head(rdma="irdma0")
    assert seen == [(True, True)]


def test_a_worker_with_a_down_port_is_refused_and_the_head_holds_vllm(caplog) -> None:
    """The head plans vLLM's start, which checks when it would run that no node was refused
    (the head may be planned before the worker)."""
    cluster = serve_cluster()
    result = plan(cluster, {"halo1": user_node(), "halo2": user_node(rdma="irdma0")})
    assert list(result.refused) == ["halo2"]
    start = next(op for op in result.ops["halo1"] if op.name == START_VLLM)
    assert not start.runs
    assert "vLLM not started: refused in this run: halo2" in caplog.text
    healthy = plan(cluster, {"halo1": user_node(), "halo2": user_node()})
    assert next(op for op in healthy.ops["halo1"] if op.name == START_VLLM).runs


def test_while_the_e810_drivers_load_the_port_is_not_judged(caplog) -> None:
    lines = [line for line in strix_halo_hardware(rdma="irdma0") if line != "module irdma"]
    hardware_without_irdma = user_node(hardware=lines)
    result = plan(serve_cluster(), {"halo1": hardware_without_irdma, "halo2": user_node()})
    assert result.refused == {}
    assert START_VLLM in result.names("halo1")
    assert "the E810 drivers load in this run" in caplog.text


def test_sockets_on_roce_is_written_out_and_reads_no_rdma_link() -> None:
    result = plan(
        serve_cluster(serve=", transport: sockets"),
        {"halo1": user_node(rdma="irdma0", rdma_links=[]), "halo2": user_node(rdma_links=[])},
    )
    env = env_lines(result)
    assert {"NCCL_NET=Socket", "NCCL_IB_DISABLE=1"} <= set(env)
    assert not any(line.startswith(("NCCL_IB_HCA", "NCCL_IB_GID_INDEX")) for line in env)
    assert result.refused == {} and START_VLLM in result.names("halo1")
    assert not any("rdma link" in c for c in result.read["halo1"])


def test_thunderbolt_defaults_to_sockets() -> None:
    cluster = serve_cluster(interconnect="thunderbolt")
    assert cluster.serve.transport == "sockets"
    result = plan_cluster(cluster, interconnect="thunderbolt", infiniband=False)
    assert {"NCCL_NET=Socket", "NCCL_IB_DISABLE=1"} <= set(env_lines(result))
