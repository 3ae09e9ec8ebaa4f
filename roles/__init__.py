"""Roles: one package per concern (`roles/NAME/`: its code, the facts and operations only it
uses; its templates in `templates/NAME/`), found here by discovery, run by deploy.py in `ORDER`.

A role declares, in its `__init__.py`:

- `ORDER`: its place in the run (packages first, reboot last);
- `PACKAGES`: the packages it needs (the packages role installs the union; the lab builds a
  stand-in RPM for each);
- `paths(data)`: every file it reads or writes on a node (the per-run snapshot is the union);
- `reads(data)`, where it reads facts: each `(Fact, kwargs)` it reads through `cached()` (the
  deploy reads them all in one command per node: `halo_cluster/node/reads.py`);
- `preflight(host, node)`, where it judges the node before any role changes it (given the
  `NodeContext`): its preflight `Check`s, printed with the deploy's; one that `refuses` refuses
  the node (the os role's known-bad kernel or firmware, the firewall role's open zone);
- `apply(node)`: its `@deploy`, given the `NodeContext` the deploy resolved;

and in its `schema.py`:

- `SECTION`: the cluster.yml keys only it uses (`Field`s: type, default, meaning, rule), which
  `schema()` adds to the cluster section (`halo_cluster.config.schema.CORE`);
- `READS`: the host data it reads beyond its section (the cluster section's keys, values
  hostdata.py derives), and `VARIABLES = variables(SECTION, READS)`: everything it may read,
  each documented in docs/roles/NAME.md (tests/plan/test_declared.py fails on any other read);
- `derive(cluster, problems, base_dir)` (in `schema.py`, or for a long one in `model.py` beside
  it, which may then import the section from `schema.py`), where a value is computed from
  several keys or checked across them: its typed values (`cluster.NAME`, host data
  `halo_NAME_FIELD`), and `prepare(cluster, problems, base_dir)`, where they name files on the
  controller (`halo_cluster.config.schema.Derivation`);
- `EXPANSION`, where a key of its section names a file of the section's keys (the serve role's
  `serve.recipe`: `halo_cluster.config.expansion.Expansion`, expanded by config/presets.py).

Adding a role is adding its folder: nothing here or in deploy.py lists the roles. A role imports
no other role: what two roles share lives in halo_cluster (tests/unit/test_layers.py).
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from functools import cache
from types import ModuleType
from typing import Any

from pyinfra import host

from halo_cluster.config.expansion import Expansion
from halo_cluster.config.schema import CORE, Derivation, Field, Schema


@cache
def all_roles() -> tuple[ModuleType, ...]:
    modules = [
        importlib.import_module(f"{__name__}.{info.name}")
        for info in pkgutil.iter_modules(__path__)
        if info.ispkg and not info.name.startswith("_")
    ]
    for module in modules:  # its schema section, as `role.schema`
        importlib.import_module(f"{module.__name__}.schema")
    return tuple(sorted(modules, key=lambda module: module.ORDER))


def sections() -> dict[str, tuple[Field, ...]]:
    """Every role's schema section, by role name, in ORDER."""
    return {name(role): role.schema.SECTION for role in all_roles()}


@cache
def schema() -> Schema:
    """The whole cluster.yml schema: the cluster section, then each role's, in ORDER, with the
    roles' derivations. An entry point that loads a config hands it to
    `halo_cluster.config.schema.use` first."""
    fields = CORE + tuple(f for section in sections().values() for f in section)
    derivations = tuple(d for role in all_roles() if (d := derivation(role)))
    return Schema(fields, derivations, expansions())


def expansions() -> tuple[Expansion, ...]:
    """Every role's `EXPANSION` (its schema section's key naming a file of its keys)."""
    return tuple(e for role in all_roles() if (e := getattr(role.schema, "EXPANSION", None)))


def derivation(role: ModuleType) -> Derivation | None:
    """The role's `derive` (and `prepare`), where its schema section or its `model.py` has one."""
    source = role.schema
    if not hasattr(source, "derive") and importlib.util.find_spec(f"{role.__name__}.model"):
        source = importlib.import_module(f"{role.__name__}.model")
    if not hasattr(source, "derive"):
        return None
    return Derivation(name(role), source.derive, getattr(source, "prepare", None))


def apply_all(node: Any) -> None:
    """Run every role's `apply(node)`, in ORDER.

    pyinfra names an operation by its call stack's line numbers, and every role is called from
    the same line here: `host.loop` adds the role's position to that name, so a role's operations
    never share a name with another role's on a node that plans something else (a plain loop
    makes the head's image pull and the worker's reboot one operation, with two `_serial`s).
    """
    for role in host.loop(all_roles()):
        role.apply(node)


def declared_paths(data: Any) -> tuple[str, ...]:
    return tuple(dict.fromkeys(p for role in all_roles() for p in role.paths(data)))


def declared_reads(data: Any) -> tuple[tuple[type, dict[str, Any]], ...]:
    """Every role's `(Fact, kwargs)` reads for this node (a role without facts has no `reads`)."""
    return tuple(r for role in all_roles() if hasattr(role, "reads") for r in role.reads(data))


def preflight_checks(node_host: Any, node: Any) -> list[Any]:
    """Every role's preflight checks of this node (`node`: its NodeContext), in ORDER
    (`halo_cluster.decide.preflight` `Check`s; a role without any has no `preflight`)."""
    return [
        c
        for role in all_roles()
        if hasattr(role, "preflight")
        for c in role.preflight(node_host, node)
    ]


def all_packages() -> tuple[str, ...]:
    return tuple(dict.fromkeys(p for role in all_roles() for p in role.PACKAGES))


def name(role: ModuleType) -> str:
    return role.__name__.rpartition(".")[2]
