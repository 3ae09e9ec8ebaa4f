"""Where the project's checkout is: deploy.py, inventory.py and tests/infra are files of the
checkout, not of the installed package, so the entry points find them here."""

from __future__ import annotations

from pathlib import Path

PACKAGE_PARENT = Path(__file__).resolve().parents[2]
MARKERS = ("deploy.py", "inventory.py", "tests/infra/conftest.py")


def is_checkout(folder: Path) -> bool:
    return all((folder / marker).is_file() for marker in MARKERS)


def checkout() -> Path | None:
    """The checkout this package was installed from (`pip install -e .`, as `make venv` does),
    else the current directory when it is one; None when neither is."""
    return next((f for f in (PACKAGE_PARENT, Path.cwd()) if is_checkout(f)), None)


# the modules' default paths (cluster.yml, reports/); the package's parent when no checkout is
# found, so that importing never fails: the entry points say what is missing
ROOT = checkout() or PACKAGE_PARENT
