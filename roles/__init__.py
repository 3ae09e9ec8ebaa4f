"""Roles: one module per concern, found here by discovery, run by deploy.py in `ORDER`.

A role module declares, next to its code:

- `ORDER`: its place in the run (packages first, reboot last);
- `PACKAGES`: the packages it needs (the packages role installs the union; the lab builds a
  stand-in RPM for each);
- `paths(data)`: every file it reads or writes on a node (the per-run snapshot is the union);
- `VARIABLES`: the host data it reads, each documented in docs/roles/NAME.md;
- `apply(node)`: its `@deploy`, given the `NodeContext` the deploy resolved.

Adding a role is adding its module: nothing here or in deploy.py lists the roles.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from functools import cache
from types import ModuleType
from typing import Any


@cache
def all_roles() -> tuple[ModuleType, ...]:
    modules = [
        importlib.import_module(f"{__name__}.{info.name}")
        for info in pkgutil.iter_modules(__path__)
        if not info.name.startswith("_")
    ]
    return tuple(sorted(modules, key=lambda module: module.ORDER))


def apply_all(node: Any) -> None:
    """Run every role's `apply(node)`, in ORDER.

    pyinfra orders operations by the line numbers of the call stack, file names aside: roles
    called from one line of a loop would interleave by their own line numbers. Each role is
    therefore called from a frame whose line number is its ORDER.
    """
    for role in all_roles():
        call = ast.parse("apply(node)", mode="eval")
        ast.increment_lineno(call, role.ORDER - 1)
        eval(compile(call, f"<role {name(role)}>", "eval"), {"apply": role.apply, "node": node})


def declared_paths(data: Any) -> tuple[str, ...]:
    return tuple(dict.fromkeys(p for role in all_roles() for p in role.paths(data)))


def all_packages() -> tuple[str, ...]:
    return tuple(dict.fromkeys(p for role in all_roles() for p in role.PACKAGES))


def name(role: ModuleType) -> str:
    return role.__name__.rpartition(".")[2]
