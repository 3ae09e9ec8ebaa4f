"""Where a page of the documentation is, for a message that names one: the user has it as a
file, not a `docs/` folder of a checkout they may not have. The project has no web address to
name it by (pyproject.toml declares none), so the wheel ships the pages inside the package
(`halo_cluster/docs/`: setup.py) and a message names the file the user can open; an editable
install names the checkout's own page. tests/unit/test_messages.py fails on a message that
names a bare `docs/` path."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
SHIPPED = PACKAGE / "docs"  # the wheel's copy; a checkout has its docs/ beside the package


def folder() -> Path:
    """The pages: the wheel's copy, else the checkout's."""
    return SHIPPED if SHIPPED.is_dir() else PACKAGE.parent / "docs"


def page(name: str) -> str:
    """The page NAME (`roles/serve.md`) as a path to open."""
    return str(folder() / name)
