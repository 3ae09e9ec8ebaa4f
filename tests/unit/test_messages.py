"""What the installed tool prints names only what its user has: no `make` target (a wheel has no
Makefile), no bare `docs/` path (a wheel has no docs/ folder: a page is named by the file the
wheel ships, halo_cluster/config/docs.py), and every page a message names exists."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from halo_cluster.config import docs
from halo_cluster.tools.commands import init

ROOT = Path(__file__).resolve().parents[2]
# what the wheel ships as code (setup.py): its strings are what the installed tool can print
SHIPPED = ("halo_cluster", "roles", "tests/infra", "deploy.py", "inventory.py")
TARGETS = re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.MULTILINE)
MAKE = re.compile(rf"\bmake ({'|'.join(map(re.escape, TARGETS))})\b")
BARE_DOCS = re.compile(r"(?<![\w./-])docs/")  # not part of a longer path or an address


def sources() -> list[Path]:
    paths = [ROOT / name for name in SHIPPED]
    return sorted(p for path in paths for p in ([path] if path.is_file() else path.rglob("*.py")))


def documentation(tree: ast.AST) -> Iterator[ast.AST]:
    """Docstrings, and a schema field's meaning (`Field(...)`: rendered into the docs pages,
    never printed): what a reader of the source or the docs sees, not the tool's user."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            yield body[0].value
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Field":
            yield from ast.walk(node)


def messages(path: Path) -> Iterator[tuple[int, str]]:
    """Every string in PATH the tool can print: its constants, f-strings' parts included."""
    tree = ast.parse(path.read_text())
    skip = {id(node) for node in documentation(tree)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield node.lineno, node.value


def test_the_scan_sees_the_makefiles_targets_and_every_shipped_module() -> None:
    assert {"demo", "status", "verify", "drift", "venv"} <= set(TARGETS)
    assert len(sources()) > 100


@pytest.mark.parametrize("pattern", [MAKE, BARE_DOCS], ids=["make", "docs"])
def test_no_message_names_what_a_wheel_user_does_not_have(pattern: re.Pattern) -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text!r}"
        for path in sources()
        for line, text in messages(path)
        if pattern.search(text)
    ]
    assert not found, "\n".join(found)


def test_the_config_init_writes_names_the_pages_as_files() -> None:
    example = (ROOT / "cluster.example.yml").read_text()
    assert BARE_DOCS.search(example)  # the checkout's reader has docs/ beside it
    written = init.render(example, ["10.0.0.11", "10.0.0.12"], "~/.ssh/id_ed25519")
    assert not BARE_DOCS.search(written), written
    assert f"{docs.page('configuration.md')}," in written


def test_every_page_a_message_names_exists() -> None:
    named = {
        node.args[0].value
        for path in sources()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and ast.unparse(node.func) in ("page", "docs.page")
        and node.args
        and isinstance(node.args[0], ast.Constant)
    }
    assert named >= {"roles/serve.md", "roles/os.md"}, named
    assert not [name for name in named if not Path(docs.page(name)).is_file()]
