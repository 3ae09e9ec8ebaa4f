"""One command reads a node (halo_cluster/node/reads.py): every fact the deploy and the roles read
through `cached()` is declared (`reads(data)` next to `paths(data)`) and comes from it, on every
plan that reaches the roles' reads; a read nobody declared still works, as a command of its own."""

from __future__ import annotations

import pytest

from halo_cluster.node.facts import DataPortHardware, Hardware
from halo_cluster.roles import packages
from tests.plan.harness import Plan, fact_reads, one_read, plan
from tests.plan.nodes import (
    cluster,
    converged,
    converged_node,
    fresh_node,
    plan_both,
    plan_by_mac,
    plan_cluster,
    serve_cluster,
)


def serving_rerun() -> Plan:
    c = serve_cluster()
    return plan(c, {n.name: converged(c, n.name) for n in c.nodes})


PLANS = {
    "no-op": lambda: plan_both(cluster(), node=converged_node()),
    "fresh": lambda: plan_both(cluster("reboot: if-needed\n")),
    "named interface": lambda: plan_both(cluster(data="{interface: enp194s0np0}")),
    "by MAC": plan_by_mac,
    "thunderbolt": lambda: plan_cluster(
        serve_cluster(interconnect="thunderbolt"), interconnect="thunderbolt"
    ),
    "serving, first run": lambda: plan_cluster(serve_cluster()),
    "serving, no-op": serving_rerun,
    "refused": lambda: plan_both(cluster(), node=fresh_node(sessions=["10.0.0.11 enp194s0np0"])),
}


@pytest.mark.parametrize("name", PLANS)
def test_every_node_is_read_in_one_command(name: str) -> None:
    result = PLANS[name]()
    if name == "refused":
        assert result.refused["halo1"]
    one_read(result)


def test_a_no_op_runs_nothing_but_its_read() -> None:
    result = PLANS["no-op"]()
    assert result.read["halo1"] == fact_reads(result, "halo1")  # no upload, no other read


def test_an_undeclared_read_is_read_on_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the test above catches: a role reading a fact it does not declare costs a round trip
    (and still reads what it should)."""
    before = PLANS["no-op"]()
    monkeypatch.setattr(packages, "reads", lambda data: ())
    after = PLANS["no-op"]()
    assert [c[:17] for c in fact_reads(after, "halo1")][1:] == ["if command -v rpm"]
    assert after.ops == before.ops


def test_a_port_the_node_finds_otherwise_is_read_again() -> None:
    """DataPortHardware finds `auto`'s port on the node; should it find none (the check still
    resolves one), the port's hardware is read for the check's port: one command more."""
    node = fresh_node()
    node[DataPortHardware] = ["port none", *node[Hardware]]
    result = plan_both(cluster(), node=node)
    reads = fact_reads(result, "halo1")
    assert len(reads) == 2 and "ethtool -i enp194s0np0" in reads[1]
    assert result.names("halo1") == plan_both(cluster()).names("halo1")
