"""Where the lab keeps its state (the controller's `.lab/`) and its caches, and where it takes
Debian from: the bottom of lab/, imported by every module that needs a path, so that none of them
imports lab.cli or lab.rootfs for one (docs/architecture.md)."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
LAB_DIR = Path(os.environ.get("HALO_LAB_DIR", PROJECT / ".lab"))
STATE = LAB_DIR / "state.json"
KEY = LAB_DIR / "ssh" / "id_ed25519"
KNOWN_HOSTS = LAB_DIR / "ssh" / "known_hosts"
MUX_DIR = LAB_DIR / "ssh" / "mux"  # one shared connection per node and user (cli.ssh_argv)
CONFIG = LAB_DIR / "cluster.yml"
CACHE = Path("/var/cache/halo-cluster-lab")
SUITE = "trixie"  # the Debian suite of the nodes' root filesystem and of the debs they take


def folder_digest(digest, folder: Path) -> None:
    """Feed every file of `folder` (name and bytes) to `digest`: part of a cached build's key."""
    for path in sorted(folder.rglob("*")):
        # the bytecode Python leaves beside a module it ran (the unit tests run the stand-in
        # from lab/standin/) is no part of the recipe
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(folder)).encode())
            digest.update(path.read_bytes())


def apt_mirror() -> str:
    """The Debian mirror this machine already uses (first URIs: of its apt sources)."""
    sources = sorted(Path("/etc/apt/sources.list.d").glob("*.sources"))
    for path in sources:
        for line in path.read_text().splitlines():
            if line.startswith("URIs:") and "security" not in line:
                return line.split()[1]
    for line in Path("/etc/apt/sources.list").read_text().splitlines():
        parts = line.split()
        if parts[:1] == ["deb"] and "security" not in line:
            return next(p for p in parts[1:] if "://" in p)
    raise RuntimeError("no Debian mirror found in /etc/apt/sources.list*")
