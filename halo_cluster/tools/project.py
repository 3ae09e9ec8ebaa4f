"""Where the tool's files are: deploy.py and inventory.py, which pyinfra runs, and the
verification (tests/infra), which pytest runs, are files, not imports. A checkout has them at its
top, and an editable install (`pip install -e .`, as `make venv` does) finds them there; a wheel
ships its own copy inside the package (`halo_cluster/entry/`, `halo_cluster/verification/`:
setup.py), so an installed tool runs from any folder. The default cluster.yml is the checkout's,
else the current directory's; what the tool keeps (the lock, Ray's token, reports/) is in the
state folder beside the config (`state`), whatever the current folder."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from halo_cluster.config import state as state_folder
from halo_cluster.config.loader import ConfigError, load_cluster
from halo_cluster.config.lock import LOCK_FILE
from halo_cluster.config.model import Cluster
from halo_cluster.config.schema import use

PACKAGE = Path(__file__).resolve().parents[1]  # halo_cluster: the checkout's or the wheel's
PACKAGE_PARENT = PACKAGE.parent
MARKERS = ("deploy.py", "inventory.py", "tests/infra/conftest.py")
# pyinfra of this interpreter, wherever its environment puts console scripts (a venv, pipx);
# without its colours when NO_COLOR is set to anything but "" (https://no-color.org; nocolor.py)
PYINFRA = (
    sys.executable,
    "-m",
    "halo_cluster.tools.nocolor" if os.environ.get("NO_COLOR") else "pyinfra",
)


@dataclass(frozen=True)
class Files:
    """What the commands run: pyinfra in `entry` (inventory.py deploy.py), pytest over
    `verification`."""

    entry: Path
    verification: Path

    def complete(self) -> bool:
        names = (self.entry / "deploy.py", self.entry / "inventory.py")
        return all(p.is_file() for p in names) and (self.verification / "conftest.py").is_file()


def is_checkout(folder: Path) -> bool:
    return all((folder / marker).is_file() for marker in MARKERS)


def checkout() -> Path | None:
    """The checkout this package was installed from (`pip install -e .`); None for a wheel."""
    return PACKAGE_PARENT if is_checkout(PACKAGE_PARENT) else None


def files() -> Files | None:
    """The checkout's files, else the copy the wheel ships; None when neither is there."""
    root = checkout()
    found = (
        Files(root, root / "tests" / "infra")
        if root
        else Files(PACKAGE / "entry", PACKAGE / "verification")
    )
    return found if found.complete() else None


# the default folder of cluster.yml when the current one has none
ROOT = checkout() or Path.cwd()


def config() -> str:
    """The config the commands use: $CLUSTER_CONFIG (the CLI's --config sets it), else the
    default one."""
    return os.environ.get("CLUSTER_CONFIG") or str(default_config())


def default_config() -> Path:
    """cluster.yml in the current folder when it has one (where `init` writes it, also with an
    editable install), else in ROOT."""
    here = Path.cwd() / "cluster.yml"
    return here if here.is_file() else ROOT / "cluster.yml"


def state() -> Path:
    """The state folder of the config the commands use: `.halo-cluster/` beside it, else
    $HALO_STATE (the CLI's --state sets it): config/state.py, which the roles' derivations
    (the lock's path, Ray's token) call too."""
    return state_folder.folder(Path(config()).absolute().parent)


def reports() -> Path:
    """Where the commands write their reports: verify's JUnit XML, drift's summaries, the bench
    history (under bench/). The only files a read-only command writes."""
    return state() / "reports"


def load(path: str | Path) -> Cluster:
    """The config at `path`, checked against the whole schema: the cluster section and every
    role's. The tools sit above the roles (docs/architecture.md), so they assemble it."""
    from halo_cluster import roles  # here: the roles import pyinfra, which verify never needs

    use(roles.schema())
    return load_cluster(path)


def load_or_say(path: str | Path) -> Cluster | None:
    """`load`, or None once its problems are printed, one line each (the command then exits
    with its own code for a bad config: docs/ci.md)."""
    try:
        return load(path)
    except ConfigError as error:
        print("\n".join(error.problems), file=sys.stderr)
        return None


def next_deploy(cluster: Cluster) -> str | None:
    """What the next deploy records of a change to the cluster's members, in one line, or None:
    the commands that only read (`where`, `drift`, `status`, `bench`, `verify`) say it, since
    they write nothing (roles/serve/controller.py writes when a deploy runs)."""
    container = cluster.container
    if container.leaving:
        token = " and rotates Ray's token" if cluster.serve.ray_token_owned else ""
        return (
            f"{LOCK_FILE}: {', '.join(container.leaving)} left the config: the next deploy "
            f"records it{token}"
        )
    if container.unrecorded:
        return f"{LOCK_FILE}: its members are not the config's nodes: the next deploy records them"
    return None
