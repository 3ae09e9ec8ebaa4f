"""Verification of the end state with pytest-testinfra, on any inventory: the lab or real nodes.

Hosts come from the same cluster.yml as the deploy ($CLUSTER_CONFIG, default cluster.yml), through
the same loader; SSH uses the config's keys and pinned known_hosts. A check that needs hardware
this node cannot have (RDMA in a container) reads NOT VERIFIED, never passed; the summary at the
end shows passed / FAILED / NOT VERIFIED per node and check, with measured values.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pytest
import testinfra

from halo_cluster import sshconfig
from halo_cluster.facts import (
    CONTAINER_IMAGE,
    IMAGE_ID,
    Firewalld,
    NetworkInterfaces,
    SshSessionInterfaces,
    as_user,
)
from halo_cluster.loader import ConfigError, load_cluster
from halo_cluster.model import Cluster, Node
from halo_cluster.safety import resolve_interface
from halo_cluster.status import ray_nodes_command

ROOT = Path(__file__).resolve().parents[2]
NOT_VERIFIED = "NOT VERIFIED"


def config_path() -> Path:
    return Path(os.environ.get("CLUSTER_CONFIG") or ROOT / "cluster.yml")


@dataclass
class Target:
    """One node: its config, a testinfra host over SSH, and helpers the checks share."""

    cluster: Cluster
    node: Node
    host: testinfra.host.Host
    _frames: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.node.name

    def run(self, command: str) -> testinfra.backend.base.CommandResult:
        return self.host.run(command)

    def out(self, command: str) -> str:
        return self.host.check_output(command)

    @cached_property
    def container(self) -> str | None:
        """The container technology when this node is one (the lab), else None."""
        virt = self.run("systemd-detect-virt --container").stdout.strip()
        return None if virt in ("", "none") else virt

    @cached_property
    def interface(self) -> str:
        fact = NetworkInterfaces()
        interfaces = fact.process(self.out(fact.command()).splitlines())
        name, problem = resolve_interface(interfaces, self.node.interface, self.node.mac)
        assert name, f"{self.name}: {problem}"
        return name

    @cached_property
    def firewall(self) -> dict:
        """firewalld's runtime and permanent zones (the deploy's own fact)."""
        fact = Firewalld()
        return fact.process(self.run(fact.command()).stdout.splitlines())

    @cached_property
    def ssh_interfaces(self) -> list[str]:
        """The interfaces that carry SSH sessions to this node: its management side."""
        fact = SshSessionInterfaces()
        sessions = fact.process(self.out(fact.command(self.node.ssh_port)).splitlines())
        return [s["interface"] for s in sessions if s["interface"]]

    def user_podman(self, command: str) -> str:
        return self.run(as_user(self.cluster.cluster_user, command)).stdout.strip()

    @cached_property
    def has_infiniband(self) -> bool:
        return self.host.file("/dev/infiniband").exists

    @cached_property
    def image_id(self) -> str:
        return self.user_podman(IMAGE_ID + shlex.quote(self.cluster.image))

    @cached_property
    def toolbox_image(self) -> str:
        """Id of the image the toolbox was made from ("" when there is no toolbox)."""
        return self.user_podman(CONTAINER_IMAGE + shlex.quote(self.cluster.toolbox))

    @cached_property
    def inside_toolbox(self) -> str:
        """The GPU/RDMA device nodes present inside the toolbox, then `memlock=<ulimit -l>`."""
        devices = "/dev/dri /dev/kfd" + (" /dev/infiniband" if self.has_infiniband else "")
        probe = f"ls -d {devices} 2>/dev/null; echo memlock=$(ulimit -l)"
        name = shlex.quote(self.cluster.toolbox)
        return self.user_podman(f"toolbox run -c {name} sh -c {shlex.quote(probe)}")

    def frames_to(self, address: str, size: int) -> tuple:
        """(full-size ping, one-byte-over ping) to `address`, read once per run."""
        key = (address, size)
        if key not in self._frames:
            self._frames[key] = (
                self.run(f"ping -c 2 -i 0.1 -W 2 -M do -s {size} {address}"),
                # refused locally before it leaves: no reply to wait for
                self.run(f"ping -c 1 -W 0.2 -M do -s {size + 1} {address}"),
            )
        return self._frames[key]

    @cached_property
    def ray_nodes(self) -> list[list]:
        """[address, alive, GPUs] of every node Ray knows, read in the head's Ray container."""
        ray = shlex.quote(ray_nodes_command())
        found = self.user_podman(f"podman exec halo-ray sh -c {ray}")
        try:
            return json.loads(found.splitlines()[-1]) if found else []
        except ValueError:
            return []

    @cached_property
    def ray_without_token(self) -> tuple[str, str]:
        """(Ray's version, what `ray status` answers a client without the token), read in the
        head's Ray container."""
        anonymous = "env -u RAY_AUTH_MODE -u RAY_AUTH_TOKEN_PATH -u RAY_AUTH_TOKEN HOME=/none"
        probe = shlex.quote(
            f"ray --version | sed -n 's/.*version //p'; {anonymous} timeout 60 ray status 2>&1"
        )
        command = f"podman exec halo-ray sh -c {probe}"
        found = self.run(as_user(self.cluster.cluster_user, command)).stdout
        first, _, rest = found.partition("\n")
        return first.strip(), rest

    def slow_values(self) -> list[str]:
        """The values worth reading before the checks, each at once with the others (one SSH
        connection per node carries them all)."""
        values = ["interface", "container", "image_id", "toolbox_image", "inside_toolbox"]
        values += ["firewall", "ssh_interfaces"]
        if self.cluster.serve.enabled and self.node.role == "head":
            values += ["ray_nodes", "ray_without_token"]
        return values

    def not_verified(self, what: str) -> None:
        """Skip as NOT VERIFIED when the hardware cannot exist here; return on real hosts."""
        if self.container:
            pytest.skip(f"{NOT_VERIFIED}: {what}: {self.container} container, no such hardware")


def connects(address: str, port: int) -> bool:
    """A TCP connection from this machine (the controller, on the management side) to a node."""
    try:
        socket.create_connection((address, port), timeout=3).close()
    except OSError:
        return False
    return True


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(Summary(), "halo-summary")
    try:
        config.halo_cluster = load_cluster(config_path())  # type: ignore[attr-defined]
    except ConfigError as error:
        pytest.exit("\n".join(error.problems), returncode=2)


@pytest.fixture(scope="session")
def cluster(pytestconfig: pytest.Config) -> Cluster:
    return pytestconfig.halo_cluster  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def targets(cluster: Cluster) -> dict[str, Target]:
    config = sshconfig.write(cluster, Path(tempfile.mkdtemp(prefix="halo-verify-")))
    found = {
        node.name: Target(
            cluster,
            node,
            testinfra.get_host(
                f"ssh://{sshconfig.alias(node)}",
                ssh_config=str(config),
                sudo=node.ssh_user != "root",
            ),
        )
        for node in cluster.nodes
    }
    # every node at once: one SSH connection each (ControlMaster), the slow reads in parallel;
    # a node that cannot be read fails its own checks below, with their messages
    size = cluster.mtu - 28  # IPv4 and ICMP headers
    with ThreadPoolExecutor(max_workers=len(found) * 10) as pool:
        for target in found.values():
            for value in target.slow_values():
                pool.submit(getattr, target, value)
            for peer in found.values():
                if peer is not target:
                    pool.submit(target.frames_to, peer.node.address, size)
    return found


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The serving checks run only where the config serves; elsewhere they are not collected."""
    cluster: Cluster = config.halo_cluster  # type: ignore[attr-defined]
    if cluster.serve.enabled:
        return
    kept = [item for item in items if "test_serving.py" not in item.nodeid]
    if len(kept) != len(items):
        print(f"serving checks left out: serve.enabled is false in {cluster.source}")
        config.hook.pytest_deselected(items=[i for i in items if i not in kept])
        items[:] = kept


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    cluster: Cluster = metafunc.config.halo_cluster  # type: ignore[attr-defined]
    names = [n.name for n in cluster.nodes]
    if "node" in metafunc.fixturenames:
        metafunc.parametrize("node_name", names, ids=names)
    if "worker" in metafunc.fixturenames:
        workers = [n.name for n in cluster.workers]
        metafunc.parametrize("worker_name", workers, ids=workers)
    if "pair" in metafunc.fixturenames:
        pairs = [(a, b) for a in names for b in names if a != b]
        metafunc.parametrize("pair_names", pairs, ids=[f"{a}->{b}" for a, b in pairs])


@pytest.fixture
def node(targets: dict[str, Target], node_name: str) -> Target:
    return targets[node_name]


@pytest.fixture
def worker(targets: dict[str, Target], worker_name: str) -> Target:
    return targets[worker_name]


@pytest.fixture
def head(targets: dict[str, Target], cluster: Cluster) -> Target:
    return targets[cluster.head.name]


@pytest.fixture
def pair(targets: dict[str, Target], pair_names: tuple[str, str]) -> tuple[Target, Target]:
    return targets[pair_names[0]], targets[pair_names[1]]


@pytest.fixture
def measured(request: pytest.FixtureRequest):
    """Record a measured value for the summary table (and the JUnit XML)."""

    def record(text: str) -> None:
        request.node.user_properties.append(("measured", text))

    return record


def _row(report: pytest.TestReport) -> tuple[str, str, str, str]:
    match = re.match(r".*::test_(\w+)(?:\[(.+)\])?$", report.nodeid)
    check, where = (match.group(1), match.group(2) or "cluster") if match else (report.nodeid, "")
    detail = "; ".join(v for k, v in report.user_properties if k == "measured")
    if report.passed:
        return where, check, "passed", detail
    if report.skipped:
        reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else ""
        reason = reason.removeprefix("Skipped: ")
        status = NOT_VERIFIED if reason.startswith(NOT_VERIFIED) else "skipped"
        return where, check, status, reason.removeprefix(f"{NOT_VERIFIED}: ")
    message = (
        str(report.longrepr.reprcrash.message) if hasattr(report.longrepr, "reprcrash") else ""
    )
    first = message.splitlines()[0] if message else ""
    return where, check, "FAILED", first.removeprefix("AssertionError: ")


class Summary:
    """Collects every check's outcome and prints the per-node table at the end."""

    def __init__(self) -> None:
        self.reports: list[pytest.TestReport] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and not report.passed):
            self.reports.append(report)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        rows = [_row(r) for r in self.reports]
        if not rows:
            return
        write = terminalreporter.write_line
        write("")
        write(f"halo-cluster verification of {config_path()}")
        width = max(len(r[1]) for r in rows)
        for where, check, status, detail in sorted(rows):
            write(f"  {where:16} {check:{width}}  {status:12}  {detail}"[:220])
        counts = {s: sum(1 for r in rows if r[2] == s) for s in ("passed", "FAILED", NOT_VERIFIED)}
        write(
            f"verification: {counts['passed']} passed, {counts['FAILED']} FAILED, "
            f"{counts[NOT_VERIFIED]} NOT VERIFIED (hardware this machine cannot have)"
        )
