"""The package as a wheel leaves it, installed in a fresh venv: every template renders, its own
deploy.py plans the same deploy as the checkout's, its commands run from a folder outside the
checkout, and it installs nothing but `halo_cluster` (the editable install resolves the same
names)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet  # pytest's own dependency

from halo_cluster.tools.commands.exits import BAD_CONFIG
from halo_cluster.tools.project import checkout
from tests.plan.nodes import plan_cluster, serve_cluster
from tests.unit.helpers_package import (
    ROOT,
    Installed,
    build_wheel,
    copy_sources,
    install,
    shipped_pages,
)

# import names as both installs must resolve them (True) or not (False)
NAMES = {
    "halo_cluster.roles": True,
    "halo_cluster.roles.serve": True,
    "halo_cluster.templates": True,
    "halo_cluster.verification": True,
    "roles": False,
    "lab": False,
    "tests": False,
}
RESOLVE = """
import importlib.util, json, sys
print(json.dumps({n: importlib.util.find_spec(n) is not None for n in sys.argv[1:]}))
"""

# run by the wheel's interpreter: the checkout is on the path after the wheel only for the plan
# harness (tests/plan), which plans the wheel's own deploy.py
PLAN = """
import json, sys
from pathlib import Path
import jinja2
import halo_cluster.roles, halo_cluster.templates
from halo_cluster.node import render
from halo_cluster.tools import project
from tests.plan import harness
site = sys.argv[1]
assert halo_cluster.roles.__file__.startswith(site), halo_cluster.roles.__file__
folders = {p.name: p for t in halo_cluster.templates.__path__ for p in Path(t).iterdir()}
assert all(str(p).startswith(site) for p in folders.values()), folders
roles = {render.folder(role.__name__) for role in halo_cluster.roles.all_roles()}
assert set(folders) <= roles, f"templates of no role: {set(folders) - roles}"
every = set()
for name in folders:
    loader = jinja2.PackageLoader(render.PACKAGE, name)
    for template in loader.list_templates():
        render.environment(loader).get_template(template)
        every.add(f"{name}/{template}")
# and every one rendered by the plans below: the RoCE and the Thunderbolt cluster's, the RoCE
# cluster's with vLLM's own launcher (serve.launcher: native), and with metrics and Grafana on
rendered = set()
loading = jinja2.Environment.get_template
def recorded(self, name, *args, **kwargs):
    rendered.add(f"{self.loader.package_path}/{name}")
    return loading(self, name, *args, **kwargs)
jinja2.Environment.get_template = recorded
# a file copied as it is (a Grafana dashboard) is read by its loader's get_source alone
sourcing = jinja2.PackageLoader.get_source
def sourced(self, environment, name):
    rendered.add(f"{self.package_path}/{name}")
    return sourcing(self, environment, name)
jinja2.PackageLoader.get_source = sourced
harness.ROOT = project.files().entry
assert str(harness.ROOT).startswith(site), harness.ROOT
from tests.plan.nodes import plan_cluster, serve_cluster
uploads = {}
for name, (link, more, top) in json.loads(sys.argv[2]).items():
    serve = ", listen: all, api_key_file: key" + more
    cluster = serve_cluster(interconnect=link, serve=serve, tmp_path=Path.cwd(), top=top)
    result = plan_cluster(cluster, interconnect=link)
    uploads[name] = {node: result.uploads(node) for node in ("halo1", "halo2")}
assert rendered == every, f"not rendered by the plans: {sorted(every - rendered)}"
print(json.dumps(uploads))
"""
# the plans PLAN makes: (interconnect, more serve keys, keys before serve's) by name
METRICS = (
    "metrics: {enabled: true, listen: all, password_file: pw, grafana: true, "
    "grafana_password_file: pw}\n"
)
PLANS = {
    "roce": ("roce", "", ""),
    "thunderbolt": ("thunderbolt", "", ""),
    "native": ("roce", ", launcher: native", ""),
    "metrics": ("roce", "", METRICS),
}
# a bcrypt hash is salted anew by each plan (roles/metrics/prometheus.py): compared without it
SALTED = "/.config/halo-cluster/metrics/web.yml"
# two nodes on loopback addresses where nothing listens on the SSH port: the commands load the
# config, run pyinfra and the verification, and every node is unreachable
UNREACHABLE = """interconnect: roce
subnet: 192.168.100.0/30
cluster_user: vllm
ssh: {user: root, port: 9, key: ssh/id_ed25519, known_hosts: ssh/known_hosts}
nodes:
  - name: node1
    ssh: {host: 127.0.0.1}
    data: {interface: enp1s0f0np0}
  - name: node2
    ssh: {host: 127.0.0.2}
    data: {interface: enp1s0f0np0}
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The wheel installed in a venv of its own (helpers_package: how, and why without its
    dependencies)."""
    return install(tmp_path_factory.mktemp("package"))


def resolved(python: Path, cwd: Path) -> dict[str, bool]:
    """Which of NAMES `python` imports, from a folder outside the checkout (-I: no
    PYTHONPATH, not the current folder)."""
    found = subprocess.run(
        [str(python), "-I", "-c", RESOLVE, *NAMES],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=True,
        timeout=60,
    )
    return json.loads(found.stdout)


def test_the_wheel_installs_halo_cluster_alone(installed: Installed) -> None:
    top = {name.split("/")[0] for name in zipfile.ZipFile(installed.wheel).namelist()}
    assert top == {"halo_cluster", f"{installed.wheel.name.split('-py')[0]}.dist-info"}


def test_the_wheel_ships_every_module_of_the_package(installed: Installed) -> None:
    """Every module of halo_cluster/, its subpackages' too (tools/status/, tools/bench/, ...):
    setup.py finds the packages rather than listing them, and this is what it found."""
    shipped = set(zipfile.ZipFile(installed.wheel).namelist())
    modules = {str(p.relative_to(ROOT)) for p in (ROOT / "halo_cluster").rglob("*.py")}
    assert "halo_cluster/tools/status/view.py" in modules
    assert sorted(modules - shipped) == []


def test_the_sdist_builds_the_same_wheel(installed: Installed, tmp_path: Path) -> None:
    """What `python -m build` and an index install do: the wheel built from the sdist, which
    must carry the files the wheel's build copies in (deploy.py, inventory.py)."""
    source = copy_sources(tmp_path / "source")
    build = (
        "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
    )
    made = subprocess.run(
        [sys.executable, "-c", build, tmp_path / "sdist"],
        cwd=source,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    with tarfile.open(tmp_path / "sdist" / made.stdout.split()[-1]) as sdist:
        sdist.extractall(tmp_path / "unpacked", filter="data")
    (unpacked,) = (tmp_path / "unpacked").iterdir()
    wheel = build_wheel(unpacked, tmp_path / "wheels")
    assert sorted(zipfile.ZipFile(wheel).namelist()) == sorted(
        zipfile.ZipFile(installed.wheel).namelist()
    )


def test_the_wheel_and_the_editable_install_resolve_the_same_names(
    installed: Installed, tmp_path: Path
) -> None:
    assert resolved(installed.python, tmp_path) == NAMES
    if checkout() is None:
        pytest.skip(f"halo_cluster is not an editable install of {ROOT}: make venv makes one")
    assert resolved(Path(sys.executable), tmp_path) == NAMES


def test_an_installed_package_renders_every_template_and_plans_the_same(
    installed: Installed, tmp_path: Path
) -> None:
    (tmp_path / "key").write_text("sk-package-test\n")
    (tmp_path / "pw").write_text("package-test-password\n")
    pythonpath = f"{installed.site}{os.pathsep}{ROOT}"
    plans = json.dumps(PLANS)
    plan = installed.run(
        str(installed.python),
        "-c",
        PLAN,
        str(installed.site),
        plans,
        cwd=tmp_path,
        PYTHONPATH=pythonpath,
    )
    assert plan.returncode == 0, plan.stderr[-3000:]
    expected = {}
    for name, (link, more, top) in PLANS.items():
        serve = ", listen: all, api_key_file: key" + more
        cluster = serve_cluster(interconnect=link, serve=serve, tmp_path=tmp_path, top=top)
        here = plan_cluster(cluster, interconnect=link)
        expected[name] = {node: unsalted(here.uploads(node)) for node in ("halo1", "halo2")}
    found = json.loads(plan.stdout.splitlines()[-1])
    assert {n: {node: unsalted(u) for node, u in f.items()} for n, f in found.items()} == expected


def unsalted(uploads: dict[str, str]) -> dict[str, str]:
    return {path: text for path, text in uploads.items() if not path.endswith(SALTED)}


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A folder outside the checkout with a cluster.yml whose nodes cannot be reached."""
    assert not tmp_path.is_relative_to(ROOT)
    (tmp_path / "ssh").mkdir()
    (tmp_path / "ssh" / "known_hosts").write_text("")
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", tmp_path / "ssh" / "id_ed25519"],
        check=True,
        timeout=60,
    )
    (tmp_path / "cluster.yml").write_text(UNREACHABLE)
    return tmp_path


def test_the_installed_commands_run_outside_the_checkout(
    installed: Installed, elsewhere: Path
) -> None:
    command = str(installed.python.parent / "halo-cluster")
    drift = installed.run(command, "drift", "--config", "cluster.yml", cwd=elsewhere)
    assert drift.returncode == 1, drift.stdout + drift.stderr
    lines = drift.stdout.splitlines()
    assert [line.split(": ")[:2] for line in lines[:2]] == [
        ["node1", "unreachable"],
        ["node2", "unreachable"],
    ], drift.stdout + drift.stderr
    assert "Connection refused" in lines[0]  # ssh's own reason (tools/reach.py)
    report = json.loads((elsewhere / ".halo-cluster" / "reports" / "drift.json").read_text())
    assert report["config"] == "cluster.yml" and report["exit_code"] == 1
    deploy = installed.run(command, "deploy", "--config", "cluster.yml", "--dry", cwd=elsewhere)
    assert deploy.returncode == 1 and "Could not connect" in deploy.stdout + deploy.stderr
    # the shipped recipes are package data: the wheel's models lists them (roles/serve/recipes)
    models = installed.run(command, "models", "--config", "cluster.yml", "--json", cwd=elsewhere)
    assert models.returncode == 0, models.stdout + models.stderr
    shipped = [r for r in json.loads(models.stdout)["recipes"] if r["shipped"]]
    assert {r["name"] for r in shipped} >= {"qwen3-14b-awq", "gpt-oss-120b-tp2"}, models.stdout
    site = installed.site.resolve()
    assert all(Path(r["file"]).resolve().is_relative_to(site) for r in shipped), models.stdout
    verify = installed.run(command, "verify", "--config", "missing.yml", cwd=elsewhere)
    assert verify.returncode == BAD_CONFIG, verify.stdout + verify.stderr
    assert f"{elsewhere / 'missing.yml'}: cannot read" in verify.stdout + verify.stderr


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


def test_the_installed_init_writes_a_config_its_where_accepts(
    installed: Installed, elsewhere: Path
) -> None:
    """The wheel's own cluster.example.yml, as a new user starts: init, then where."""
    command = str(installed.python.parent / "halo-cluster")
    new = elsewhere / "new"
    new.mkdir()
    key = str(elsewhere / "ssh" / "id_ed25519")
    init = installed.run(command, "init", "10.0.0.11", "10.0.0.12", "--ssh-key", key, cwd=new)
    assert init.returncode == 0, init.stdout + init.stderr
    where = installed.run(command, "where", "--config", "cluster.yml", cwd=new)
    assert where.returncode == 0, where.stdout + where.stderr
    assert 'ssh: {host: "10.0.0.11"}' in (new / "cluster.yml").read_text()


def test_the_wheel_ships_the_pages_its_messages_name(installed: Installed, tmp_path: Path) -> None:
    """halo_cluster/config/docs.py: a message names the wheel's own copy of a page."""
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    pages = {f"halo_cluster/docs/{page}" for page in shipped_pages()}
    assert {name for name in names if name.startswith("halo_cluster/docs/")} == pages
    where = "from halo_cluster.config.docs import page; print(page('roles/serve.md'))"
    shown = installed.run(str(installed.python), "-I", "-c", where, cwd=tmp_path)
    assert shown.stdout.strip() == str(installed.site / "halo_cluster/docs/roles/serve.md")
