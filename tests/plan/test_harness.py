"""The fake node answers by fact (tests/plan/harness.py): a read it has no answer for fails the
plan, naming the read, however much of another fact's command it shares."""

from __future__ import annotations

import pytest
from pyinfra.api import FactBase
from pyinfra.facts.rpm import RpmPackages

from halo_cluster.node.facts import NetworkInterfaces, SshSessionInterfaces
from halo_cluster.roles import packages
from tests.plan.harness import UnansweredRead, given, plan
from tests.plan.nodes import cluster, fresh_node, plan_both


class Neighbours(FactBase[list[str]]):
    """A new fact whose command holds another's whole command: a fake node answering by
    substrings would answer it with NetworkInterfaces' output."""

    @staticmethod
    def default() -> list[str]:
        return []

    def command(self) -> str:
        return f"{NetworkInterfaces().command()}; ip -j neigh show"

    def process(self, output: list[str]) -> list[str]:
        return output


def test_a_declared_fact_no_node_answers_fails_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(packages, "reads", lambda data: ((RpmPackages, {}), (Neighbours, {})))
    with pytest.raises(UnansweredRead, match=r"^halo1: the fake node answers no Neighbours\(\)$"):
        plan_both(cluster())


def test_a_read_of_its_own_no_node_answers_fails_the_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """RpmPackages undeclared is read on its own; a node without its answer fails loudly."""
    monkeypatch.setattr(packages, "reads", lambda data: ())
    node = fresh_node()
    del node[RpmPackages]
    with pytest.raises(UnansweredRead, match="halo1: if command -v rpm") as failed:
        plan(cluster(), {"halo1": node, "halo2": fresh_node()})
    assert "halo2" not in str(failed.value)


def test_an_answer_with_arguments_answers_those_only() -> None:
    node = fresh_node()
    node[given(SshSessionInterfaces, port=2222)] = node.pop(SshSessionInterfaces)
    with pytest.raises(UnansweredRead, match=r"SshSessionInterfaces\(port=22\)"):
        plan(cluster(), {"halo1": node, "halo2": fresh_node()})
