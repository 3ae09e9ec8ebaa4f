"""How a refused run ends on the lab: a roce lab serving with the default `transport: rdma` has
no RDMA stack (`rdma link` fails on a veth without irdma), so every node is refused with its own
line and the fix, nothing on them changes, and the run's last line names them and exit 1; never
pyinfra's "No hosts remaining!"."""

from __future__ import annotations

from tests.e2e.conftest import Lab
from tests.e2e.serving_lab import SERVE

FIX = "RdmaLinks could not be read: `rdma link` fails"


def test_a_lab_without_rdma_is_refused_node_by_node() -> None:
    lab = Lab(2, "roce").ensure_up()
    rdma = SERVE.replace("transport: sockets", "transport: rdma")
    assert rdma != SERVE
    result = lab.deploy(config=lab.config(rdma))
    assert result.returncode == 1, result.stderr[-3000:]
    log = result.stdout + result.stderr
    for node in lab.nodes:
        assert f"[{node}] refused: {FIX}" in log, log[-3000:]
    assert "No hosts remaining" not in log and "pyinfra error" not in log
    assert result.stderr.rstrip().splitlines()[-1] == (
        "halo-cluster: refused 2 nodes (node1, node2), each for the reason on its own line "
        "above: exit 1 (halo-cluster deploy --help)"
    )
