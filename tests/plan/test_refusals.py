"""How a refused run ends: a fact that cannot be read on a node (`rdma link` without an RDMA
stack, as on a roce lab serving with the default `transport: rdma`) is that node's refusal line
with the fix, every refused node gets its own line, nothing on them is planned, and the run's last
line names them and the exit code; never pyinfra's "No hosts remaining!"."""

from __future__ import annotations

from halo_cluster.node import batch, report
from tests.plan.harness import fact_reads, plan
from tests.plan.nodes import serve_cluster, user_node

NO_RDMA_STACK = {"success": False, "stderr": "Failed to open NETLINK_RDMA socket"}
FIX = (
    "RdmaLinks could not be read: `rdma link` fails: the node's RDMA stack is not loaded "
    "(modprobe irdma; the rdma role loads it at boot), or set serve.transport: sockets"
)


def plan_without_rdma(*names: str):
    cluster = serve_cluster()
    return plan(
        cluster,
        {
            n.name: user_node(rdma_links=NO_RDMA_STACK) if n.name in names else user_node()
            for n in cluster.nodes
        },
    )


def test_every_node_without_its_rdma_stack_is_refused_with_the_fix() -> None:
    result = plan_without_rdma("halo1", "halo2")  # no PyinfraError: the run goes on to its end
    assert result.refused == {"halo1": FIX, "halo2": FIX}
    assert result.ops["halo1"] == [] and result.ops["halo2"] == []
    for node in ("halo1", "halo2"):
        # the node's one read, then the failed part once more on its own (a passing failure
        # must not refuse a node): never a third time, never through pyinfra's own fact read
        first, again = fact_reads(result, node)
        assert batch.MARK in first and batch.MARK in again and "rdma link" in again
        assert "ip -j addr" not in again


def test_only_the_node_that_cannot_be_read_is_refused() -> None:
    result = plan_without_rdma("halo2")
    assert result.refused == {"halo2": FIX}
    assert result.ops["halo2"] == [] and result.ops["halo1"]


def test_the_run_ends_with_one_line_naming_the_refused_nodes() -> None:
    assert report.end_line([]) is None
    refused = [
        {"node": "halo1", "kind": "refused", "reason": FIX},
        {"node": "halo2", "kind": "refused", "reason": FIX},
        {"node": "halo2", "kind": "refused", "reason": "over its memory budget"},
    ]
    assert report.end_line(refused) == (
        "halo-cluster: refused 2 nodes (halo1, halo2), each for the reason on its own line "
        "above: exit 1 (halo-cluster deploy --help)"
    )
    assert report.end_line(refused[:1]).startswith("halo-cluster: refused 1 node (halo1),")
    out_of_order = [{"node": n, "kind": "refused", "reason": FIX} for n in ("n10", "n2", "n1")]
    assert "(n1, n2, n10)" in report.end_line(out_of_order)
