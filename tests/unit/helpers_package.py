"""The wheel as a user installs it, for the tests that run the installed tool (test_package,
tests/e2e/test_first_user.py): built from a copy of the sources (no network, no build artefacts
in the checkout), installed without its dependencies into a venv of its own, whose path reaches
this environment's dependencies (pyinfra, jinja2, pytest, ...) after the wheel: the tests run
offline, and a venv with its dependencies installed again would cost a minute for the same
versions (constraints.txt pins them)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# what the wheel is built from: everything setup.py maps or copies
SOURCES = (
    "pyproject.toml",
    "setup.py",
    "halo_cluster",
    "roles",
    "templates",
    "tests/infra",
    "deploy.py",
    "inventory.py",
    "cluster.example.yml",
    "MANIFEST.in",
    "docs",
)
PIP = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]


def shipped_pages() -> list[str]:
    """The pages of docs/ the wheel ships (as `halo_cluster/docs/NAME`), by setup.py's own
    CHECKOUT_ONLY, read without running setup.py."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    left_out = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        and [getattr(t, "id", "") for t in node.targets] == ["CHECKOUT_ONLY"]
    )
    pages = (p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    return sorted(page for page in pages if not page.startswith(left_out))


def copy_sources(source: Path) -> Path:
    """What the wheel is built from, copied (no build artefacts in the checkout)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in SOURCES:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=ignore)
        else:
            shutil.copy(ROOT / name, source / name)
    return source


def build_wheel(source: Path, wheels: Path) -> Path:
    subprocess.run(
        [*PIP, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", wheels, source],
        check=True,
        timeout=120,
    )
    return next(wheels.glob("halo_cluster-*.whl"))


@dataclass(frozen=True)
class Installed:
    wheel: Path
    python: Path
    site: Path

    @property
    def command(self) -> str:
        """The installed console script."""
        return str(self.python.parent / "halo-cluster")

    def run(self, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
        clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CLUSTER_CONFIG")}
        return subprocess.run(
            list(args),
            capture_output=True,
            text=True,
            cwd=cwd,
            env=dict(clean, **env),
            stdin=subprocess.DEVNULL,
            timeout=300,
        )


def install(folder: Path) -> Installed:
    """The wheel built and installed under FOLDER (its sources, wheels and venv)."""
    wheels, venv = folder / "wheels", folder / "venv"
    wheel = build_wheel(copy_sources(folder / "source"), wheels)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=60)
    python = venv / "bin" / "python"
    subprocess.run(
        [*PIP, "--python", python, "install", "--no-deps", "--no-index", wheel],
        check=True,
        timeout=120,
    )
    site = Path(sysconfig.get_path("purelib", vars={"base": venv, "platbase": venv}))
    (site / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return Installed(wheel, python, site)
