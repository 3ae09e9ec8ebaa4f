"""The package as `pip install .` (not editable) leaves it: every role's templates are package
data, so an installed copy renders them and plans the same deploy as the checkout."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.specifiers import SpecifierSet  # pytest's own dependency

from tests.plan.nodes import plan_cluster, serve_cluster

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "halo_cluster", "roles", "lab")

# run by the installed copy: the checkout is on the path after it only for deploy.py and the
# plan harness
PLAN = """
import json, sys
from pathlib import Path
import jinja2, roles
from halo_cluster.node.render import environment
from halo_cluster.roles import all_roles
assert roles.__file__.startswith(sys.argv[1]), roles.__file__
for role in all_roles():
    folder = Path(role.__file__).parent / "templates"
    loader = jinja2.PackageLoader(role.__name__, "templates") if folder.is_dir() else None
    for name in loader.list_templates() if loader else ():
        environment(loader).get_template(name)
from tests.plan.nodes import plan_cluster, serve_cluster
cluster = serve_cluster(serve=", listen: all, api_key_file: key", tmp_path=Path.cwd())
result = plan_cluster(cluster)
print(json.dumps({node: result.uploads(node) for node in ("halo1", "halo2")}))
"""


def build_and_install(tmp_path: Path) -> Path:
    """A wheel built from a copy of the sources (no network, no build artefacts in the checkout),
    installed into a folder of its own."""
    source = tmp_path / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=ignore)
        else:
            shutil.copy(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", wheels, source],
        check=True,
        timeout=120,
    )
    wheel = next(wheels.glob("halo_cluster-*.whl"))
    subprocess.run(
        [*pip, "install", "--no-deps", "--no-index", "--target", site, wheel],
        check=True,
        timeout=120,
    )
    return site


def test_an_installed_package_renders_every_template_and_plans_the_same(tmp_path: Path) -> None:
    site = build_and_install(tmp_path)
    (tmp_path / "key").write_text("sk-package-test\n")
    env = dict(os.environ, PYTHONPATH=f"{site}{os.pathsep}{ROOT}")
    installed = subprocess.run(
        [sys.executable, "-c", PLAN, str(site)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    here = plan_cluster(serve_cluster(serve=", listen: all, api_key_file: key", tmp_path=tmp_path))
    expected = {node: here.uploads(node) for node in ("halo1", "halo2")}
    assert json.loads(installed.stdout.splitlines()[-1]) == expected


def test_every_requirement_has_its_exact_version_in_the_constraints() -> None:
    """make venv installs with -c constraints.txt: a requirement missing there floats."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"].values()
    required = [r for group in (project["dependencies"], *extras) for r in group]
    pinned = dict(
        line.split("==")
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    )
    names = {re.split(r"[<>=!~\[ ]", r)[0].lower().replace("_", "-") for r in required}
    assert names <= {name.lower().replace("_", "-") for name in pinned}, names - set(pinned)
    assert "pyinfra>=3.10,<3.11" in project["dependencies"]


def test_the_tests_run_on_the_pyinfra_the_constraints_pin_inside_the_declared_range() -> None:
    """pyproject.toml declares the range pyinfra may be, constraints.txt the one version CI
    installs and these tests prove (docs/architecture.md, Packaging)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = next(r for r in project["dependencies"] if r.startswith("pyinfra"))
    pinned = next(
        line.split("==")[1]
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if line.startswith("pyinfra==")
    )
    assert SpecifierSet(declared.removeprefix("pyinfra")).contains(pinned)
    assert metadata.version("pyinfra") == pinned
