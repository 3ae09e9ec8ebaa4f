"""End-to-end tests against the built-in lab: real systemd, sshd, NetworkManager, dnf over SSH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from halo_cluster.tools.commands import verify as verify_command
from lab import cli, releases

ROOT = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).parent / "pyinfra")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.geteuid() != 0:
        reason = "the lab needs root (systemd-nspawn, network namespaces): run as root"
        for item in items:
            if "e2e" in item.nodeid:
                item.add_marker(pytest.mark.skip(reason=reason))
    items.sort(key=lab_needed)


def lab_needed(item: pytest.Item) -> int:
    """Which lab a test needs, in the order they run: each state is reached once, then kept
    for the tests that need it (one that changes it restores it), instead of a test of another
    kind throwing it away in between (the serving lab took 15-45 s to come back each time).

    0 its own (fresh nodes, other shapes, no lab); 1 the 2-node lab converged (`converged`);
    2 that lab serving, only read (`served`, shared, or marked `serving`); 3 the serving lab,
    changed and restored (`serving`); 4 the serving lab left with serve.enabled false, after
    every test that needs it serving (`serve_off`); 5 the same 2-node lab, its kernels changed
    (`kernels`); 6 a lab of another shape after all of them (`last`).
    """
    names = item.fixturenames
    if item.get_closest_marker("last"):
        return 6
    if item.get_closest_marker("kernels"):
        return 5
    if item.get_closest_marker("serve_off"):
        return 4
    if "serving" in names:
        return 3
    if "served" in names or item.get_closest_marker("serving"):
        return 2
    return 1 if "converged" in names else 0


class Lab:
    """Drive the lab and the deploy the way a user does: `python -m lab`, pyinfra, ssh."""

    def __init__(self, nodes: int, link: str, fedora: int | None = None) -> None:
        self.nodes = cli.node_names(nodes)
        self.link = link
        self.release = releases.release(fedora)

    def up_args(self) -> tuple[str, ...]:
        shape = ("up", "--nodes", str(len(self.nodes)), "--link", self.link)
        return (*shape, "--fedora", str(self.release.version))

    def lab(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [sys.executable, "-m", "lab", *args], cwd=ROOT, capture_output=True, text=True
        )
        assert not check or result.returncode == 0, result.stderr + result.stdout
        return result

    def fresh(self) -> Lab:
        """New nodes from the cached root filesystem: nothing of an earlier test remains."""
        self.lab("down")
        self.lab(*self.up_args())
        return self

    def converged(self) -> Lab:
        """Fresh nodes, deployed with `reboot: if-needed`: arguments active, link up."""
        self.fresh()
        return self.ensure_converged()

    def ensure_up(self) -> Lab:
        """These nodes running, whatever an earlier test did (`lab up` keeps a lab of this shape
        as it is, and makes a new one otherwise; asked here first, which costs no `lab` start)."""
        if not cli.is_up(len(self.nodes), self.link, self.release):
            self.lab(*self.up_args())
        return self

    def ensure_converged(self, extra: str = "") -> Lab:
        """These nodes up and converged with `reboot: if-needed` (and `extra` config): a
        precondition a test sets up itself, so that it runs alone and in any order (a no-op
        deploy when already there)."""
        self.ensure_up()
        result = self.deploy(config=self.config("reboot: if-needed\n" + extra))
        assert result.returncode == 0, failure(result)
        return self

    def boot_packaged_kernel(self, node: str, release: str = "6.18.6-200.fc43.x86_64") -> None:
        """The node back on the lab's default kernel: boot entries no installed kernel-core
        owns (`install-kernel`'s) removed, `release` the default, rebooted when it runs another
        (the nodes of one cluster run one kernel: verify fails otherwise)."""
        script = (
            "for f in /boot/loader/entries/*.conf; do v=$(sed -n 's/^version //p' \"$f\"); "
            'rpm -q "kernel-core-${v%.*}" >/dev/null 2>&1 || rm -f "$f" "/boot/vmlinuz-$v"; done; '
            f"grub2-set-default $(cat /etc/kernel/entry-token)-{release}"
        )
        self.ssh(node, script)
        if self.ssh(node, "uname -r").strip() != release:
            self.lab("reboot", node)

    def ssh(self, node: str, command: str, check: bool = True) -> str:
        address = cli.node_address(cli.load_state(), node)
        result = subprocess.run(
            [*cli.ssh_argv(address), command], capture_output=True, text=True, timeout=120
        )
        assert not check or result.returncode == 0, f"{node}: {command}: {result.stderr}"
        return result.stdout

    def deploy(self, *args: str, config: Path | None = None) -> subprocess.CompletedProcess:
        env = dict(os.environ, CLUSTER_CONFIG=str(config or cli.CONFIG))
        # -y skips change detection, which is all a dry run does
        confirm = [] if "--dry" in args else ["-y"]
        return subprocess.run(
            [PYINFRA, *confirm, *args, "inventory.py", "deploy.py"],
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )

    def deploy_json(self, *args: str) -> dict:
        result = self.deploy("--json", *args)
        assert result.returncode == 0, result.stderr[-3000:]
        return json.loads(result.stdout)

    def config(self, extra: str) -> Path:
        """The lab's cluster.yml with extra top-level keys."""
        path = cli.LAB_DIR / "cluster-extra.yml"
        path.write_text(cli.CONFIG.read_text() + extra)
        return path


def verify(*args: str, config: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, CLUSTER_CONFIG=str(config or cli.CONFIG))
    return subprocess.run(
        [
            sys.executable,
            *verify_command.VERIFY,
            "tests/infra",
            "--junitxml",
            str(ROOT / "reports" / "verify-lab.xml"),
            *args,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def summary(result: subprocess.CompletedProcess) -> dict[tuple[str, str], str]:
    rows = {}
    table = result.stdout.split("halo-cluster verification of", 1)[1].split("\nverification:")[0]
    for line in table.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 3:
            status = "NOT VERIFIED" if parts[2] == "NOT" else parts[2]
            rows[(parts[0], parts[1])] = status
    return rows


def failure(result: subprocess.CompletedProcess) -> str:
    """A failed deploy's node errors (pyinfra prints them long before its summary table)."""
    lines = (result.stderr + result.stdout).splitlines()
    errors = [line for line in lines if line.strip().startswith("[node") and "Success" not in line]
    return "\n".join(errors[-40:]) + "\n" + "\n".join(lines[-15:])


def changed_hosts(result: dict) -> dict[str, list[str]]:
    """{operation name: hosts it changed} from pyinfra's --json results."""
    return {op["name"]: op["success"] for op in result["results"]["operations"] if op["success"]}


@pytest.fixture(scope="session", autouse=True)
def lab_down_at_exit() -> Iterator[None]:
    yield
    if os.geteuid() == 0:
        Lab(2, "roce").lab("down")


@pytest.fixture
def converged() -> Lab:
    """The 2-node lab converged with `reboot: if-needed`, not serving (tests/e2e/states.py)."""
    from tests.e2e import states  # it builds on Lab: imported here

    return states.reach(states.CONVERGED)


def serving_lab() -> Lab:
    """The 2-node lab converged with lab/serve.yml and answering /health."""
    from tests.e2e import states  # it builds on Lab: imported here

    return states.reach(states.SERVING)


@pytest.fixture
def serving() -> Lab:
    """The serving lab, for a test that changes it (and restores it)."""
    return serving_lab()


_SERVED: list[Lab] = []  # the serving lab while only tests that read it run


def pytest_runtest_setup(item: pytest.Item) -> None:
    if "served" not in item.fixturenames:
        _SERVED.clear()


@pytest.fixture
def served() -> Lab:
    """The serving lab for a test that only reads it: converged by the first of these tests,
    which run one after another (`lab_needed`), and shared by the next ones (a test of another
    kind in between makes the next one converge it again)."""
    from tests.e2e.serving_lab import wait_serving  # it builds on Lab: imported here

    if _SERVED:
        wait_serving(_SERVED[0])
    else:
        _SERVED.append(serving_lab())
    return _SERVED[0]
