"""A role reads only the host data it declares (`schema.VARIABLES`: its section's keys and its
`READS`, documented in docs/roles/NAME.md): every `host.data` read during a role's `apply`,
`paths` or `reads`, over plans that reach every role's branches, is attributed to that role and
checked against its declaration."""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pyinfra
import pytest
from pyinfra.api.host import HostData

from halo_cluster import roles
from halo_cluster.config.schema import host_name
from halo_cluster.node import deployreads, operations, report
from halo_cluster.roles import all_roles
from tests.plan.harness import ROOT
from tests.plan.nodes import cluster, plan_both, plan_cluster, serve_cluster

PYINFRA = str(Path(pyinfra.__file__).parent)
ROLES = all_roles()
# the deploy's own bookkeeping: every event names its node, whichever role caused it; and the
# deploy's own reads (node/deployreads.py), which a role reading a peer's snapshot makes for that
# peer (reads.prefetch)
MACHINERY = {report.__file__, operations.__file__, deployreads.__file__, str(ROOT / "deploy.py")}


def _by_a_role(frame: FrameType | None) -> bool:
    """Whether the read comes from a role (or a domain module it calls), not from pyinfra or the
    deploy's bookkeeping."""
    while frame and frame.f_code.co_filename.startswith(PYINFRA):
        frame = frame.f_back
    return frame is not None and frame.f_code.co_filename not in MACHINERY


def attributed(name: str, function: Callable, current: list[str]) -> Callable:
    def call(*args: Any, **kwargs: Any) -> Any:
        current.append(name)
        try:
            return function(*args, **kwargs)
        finally:
            current.pop()

    return call


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch, tmp_path) -> dict[str, set[str]]:
    """{role: host data names it read} over a plain, a rebooting and two serving plans."""
    current: list[str] = []
    found: dict[str, set[str]] = defaultdict(set)
    read = HostData.__getattr__

    def recorded(self: HostData, key: str) -> Any:
        if current and key.startswith("halo_") and _by_a_role(sys._getframe(1)):
            found[current[-1]].add(key)
        return read(self, key)

    monkeypatch.setattr(HostData, "__getattr__", recorded)
    for role in all_roles():
        for function in ("apply", "paths", "reads"):
            if not hasattr(role, function):
                continue
            wrapped = attributed(roles.name(role), getattr(role, function), current)
            monkeypatch.setattr(role, function, wrapped)
    (tmp_path / "key").write_text("sk-declared\n")
    plan_both(cluster("reboot: if-needed\n"))
    plan_cluster(serve_cluster(serve=", listen: all, api_key_file: key", tmp_path=tmp_path))
    plan_cluster(serve_cluster(interconnect="thunderbolt"), interconnect="thunderbolt")
    return found


def test_every_role_reads_only_the_host_data_it_declares(reads: dict[str, set[str]]) -> None:
    assert reads["kernel"] and reads["serve"]  # the reads were recorded at all
    undeclared = {
        roles.name(role): sorted(reads[roles.name(role)] - set(role.schema.VARIABLES))
        for role in all_roles()
    }
    assert undeclared == {name: [] for name in undeclared}


def raw_keys() -> dict[str, set[str]]:
    """Each role's keys, by their host data names (`halo_serve_port`)."""
    return {
        roles.name(role): {host_name(f.path) for f in role.schema.SECTION if f.type != "mapping"}
        for role in all_roles()
    }


def others_keys(reads: set[str], name: str, keys: dict[str, set[str]]) -> list[str]:
    return sorted(read for read in reads for other in keys if other != name and read in keys[other])


def test_no_role_declares_another_roles_raw_key() -> None:
    """A value another role's keys decide is read as that role derives it (the fields of its
    `Derivation`: `halo_serve_exposed_port`, `halo_kernel_gtt_bytes`), so it is derived once."""
    keys = raw_keys()
    found = {roles.name(r): others_keys(set(r.schema.READS), roles.name(r), keys) for r in ROLES}
    assert found == {name: [] for name in found}


def test_no_role_reads_another_roles_raw_key(reads: dict[str, set[str]]) -> None:
    keys = raw_keys()
    found = {name: others_keys(reads[name], name, keys) for name in keys}
    assert found == {name: [] for name in found}
