"""The benchmark's keys (`bench.*`): the workload `halo-cluster bench` runs with the image's own
`vllm bench serve`, the tolerance its comparison allows and whether the image upgrade's gate runs
it (halo_cluster/tools/bench/, docs/bench.md). The bench changes nothing on a node: this role
declares its keys so that the loader validates them and their table is generated like every
role's, and applies nothing."""

from typing import Any

from pyinfra.api import deploy

from halo_cluster.node.context import NodeContext

ORDER = 99
PACKAGES = ()


def paths(data: Any) -> tuple[str, ...]:
    return ()


@deploy("Bench")
def apply(node: NodeContext) -> None:
    """Nothing to converge: the benchmark runs from the controller, in the serving container."""
