"""Where the project's checkout is: deploy.py, inventory.py and tests/infra are files of the
checkout, not of the installed package, so the entry points find them here."""

from __future__ import annotations

from pathlib import Path

from halo_cluster import roles
from halo_cluster.config.loader import load_cluster
from halo_cluster.config.model import Cluster
from halo_cluster.config.schema import use

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


def load(path: str | Path) -> Cluster:
    """The config at `path`, checked against the whole schema: the cluster section and every
    role's. The tools sit above the roles (docs/architecture.md), so they assemble it."""
    use(roles.schema())
    return load_cluster(path)
