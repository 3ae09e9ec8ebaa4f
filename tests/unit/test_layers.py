"""The layers of docs/architecture.md, read from the imports: each imports only layers below it,
nothing in halo_cluster below the tools imports roles, no role imports another role."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# each layer of halo_cluster and the layers it may import (itself included)
ALLOWED = {
    "config": {"config"},
    "decide": {"config", "decide"},
    "node": {"config", "decide", "node"},
    "tools": {"config", "decide", "node", "tools"},
}
# the command-line tools sit above the roles, as deploy.py and inventory.py do: they load a
# config, so they assemble the schema from the roles' sections (`roles.schema()`), and import
# nothing else of a role
ABOVE_ROLES = {"tools": {"roles", "roles.schema"}}


def imported(path: Path) -> set[str]:
    """Every module `path` imports, by its dotted name."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return names


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_a_layer_imports_only_layers_below_it(layer: str) -> None:
    for path in sorted((ROOT / "halo_cluster" / layer).glob("*.py")):
        for name in imported(path):
            parts = name.split(".")
            if parts[0] == "roles":
                assert name in ABOVE_ROLES.get(layer, ()), f"{layer}/{path.name} imports {name}"
            if parts[0] == "halo_cluster" and len(parts) > 1:
                assert parts[1] in ALLOWED[layer], f"{layer}/{path.name} imports {name}"


def test_no_role_imports_another_role() -> None:
    for folder in sorted(p for p in (ROOT / "roles").iterdir() if (p / "__init__.py").exists()):
        for path in sorted(folder.rglob("*.py")):
            for name in imported(path):
                parts = name.split(".")
                if parts[0] == "roles":
                    assert parts[1:2] == [folder.name], f"{folder.name}/{path.name} imports {name}"


def test_no_role_imports_the_tools() -> None:
    for path in sorted((ROOT / "roles").rglob("*.py")):
        for name in imported(path):
            assert not name.startswith("halo_cluster.tools"), f"{path} imports {name}"
