"""A role reads only the host data it declares (`schema.VARIABLES`: its section's keys and its
`READS`, documented in docs/roles/NAME.md): every `host.data` read during a role's `apply`,
`paths` or `reads`, over plans that reach every role's branches, is attributed to that role and
checked against its declaration."""

from __future__ import annotations

import ast
import re
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
from halo_cluster.roles.serve import flags
from tests.plan.harness import ROOT
from tests.plan.nodes import cluster, plan_both, plan_cluster, serve_cluster

PYINFRA = str(Path(pyinfra.__file__).parent)
ROLES = all_roles()
# the deploy's own bookkeeping: every event names its node, whichever role caused it; and the
# deploy's own reads (node/deployreads.py), which a role reading a peer's snapshot makes for that
# peer (reads.prefetch)
MACHINERY = {report.__file__, operations.__file__, deployreads.__file__, str(ROOT / "deploy.py")}


def _reader(frame: FrameType | None) -> str | None:
    """The file of the role (or of a domain module it calls) the read comes from; None when it
    comes from pyinfra or the deploy's bookkeeping."""
    while frame and frame.f_code.co_filename.startswith(PYINFRA):
        frame = frame.f_back
    if frame is None or frame.f_code.co_filename in MACHINERY:
        return None
    return frame.f_code.co_filename


def attributed(name: str, function: Callable, current: list[str]) -> Callable:
    def call(*args: Any, **kwargs: Any) -> Any:
        current.append(name)
        try:
            return function(*args, **kwargs)
        finally:
            current.pop()

    return call


# where each read was made: {host data name: the files that read it}, filled by `reads`
READ_IN: dict[str, set[str]] = defaultdict(set)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch, tmp_path) -> dict[str, set[str]]:
    """{role: host data names it read} over a plain, a rebooting and two serving plans (and
    `READ_IN`, where)."""
    current: list[str] = []
    found: dict[str, set[str]] = defaultdict(set)
    read = HostData.__getattr__
    READ_IN.clear()

    def recorded(self: HostData, key: str) -> Any:
        if current and key.startswith("halo_") and (reader := _reader(sys._getframe(1))):
            found[current[-1]].add(key)
            READ_IN[key].add(reader)
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


# the keys TP x PP is made of: vLLM is given each as its flag (flags.py); every other reader takes
# the product as the serve derivation makes it, `halo_serve_gpus` (`cluster.serve.gpus`), but the
# fit estimate (the serve role's preflight, fit.py, not recorded here), whose KV cache per node
# depends on how the layers are split, by TP or by PP
PARALLEL_KEYS = ("tensor_parallel_size", "pipeline_parallel_size")


def test_tp_and_pp_are_read_only_as_vllms_flags(reads: dict[str, set[str]]) -> None:
    readers = {key: READ_IN[key] for key in (f"halo_serve_{name}" for name in PARALLEL_KEYS)}
    assert all(readers.values())  # the flags were rendered at all
    assert readers == {key: {flags.__file__} for key in readers}


def _names_in(node: ast.AST) -> str:
    return " ".join(
        n.id if isinstance(n, ast.Name) else n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Name | ast.Attribute)
    )


def _is_tp_times_pp(node: ast.AST) -> bool:
    if not isinstance(node, ast.BinOp) or not isinstance(node.op, ast.Mult):
        return False
    names = _names_in(node)
    return bool(re.search(r"tensor_parallel|\btp\b", names)) and bool(
        re.search(r"pipeline_parallel|\bpp\b", names)
    )


def test_tp_x_pp_is_multiplied_only_in_the_serve_derivation() -> None:
    """The tools (status's budget) and the decide layer are no roles, which the reads above
    cover: the product is looked for in the source of every module."""
    sources = [*(ROOT / "halo_cluster").rglob("*.py"), *(ROOT / "roles").rglob("*.py")]
    found = sorted(
        str(path.relative_to(ROOT))
        for path in sources
        if any(_is_tp_times_pp(node) for node in ast.walk(ast.parse(path.read_text())))
    )
    # besides the derivation: the fit estimate's arithmetic of each candidate TP x PP
    # (`halo-cluster fit` and the serve role's preflight, fit.py), never the cluster's product
    assert found == [
        "halo_cluster/decide/fitestimate.py",
        "halo_cluster/decide/kvcache.py",
        "roles/serve/model.py",
    ]
