"""Verification of the end state with pytest-testinfra, on any inventory: the lab or real nodes.

Hosts come from the same cluster.yml as the deploy ($CLUSTER_CONFIG, default cluster.yml), through
the same loader; SSH uses the config's keys and pinned known_hosts. A check that needs hardware
this node cannot have (RDMA in a container) reads NOT VERIFIED, never passed; the summary at the
end shows passed / FAILED / NOT VERIFIED per node and check, with measured values.
"""

from __future__ import annotations

import re
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path

import pytest
import testinfra

from halo_cluster.config.loader import ConfigError
from halo_cluster.config.model import Cluster
from halo_cluster.tools import project, sshconfig

from .target import NOT_VERIFIED, Target


def config_path() -> Path:
    return Path(project.config())


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(Summary(), "halo-summary")
    try:
        config.halo_cluster = project.load(config_path())  # the whole schema, as the tools load it  # type: ignore[attr-defined]
    except ConfigError as error:
        pytest.exit("\n".join(error.problems), returncode=2)
    # the nodes are read while pytest collects the checks
    config.halo_targets = read_nodes(config.halo_cluster)  # type: ignore[attr-defined]


def read_nodes(cluster: Cluster) -> tuple[dict[str, Target], list[Future]]:
    """A Target per node, and the reads under way: every node at once, each in one SSH command
    (then one more for the commands that name what the first found: the data interface, the
    user's home). A node that cannot be read fails its own checks, with their messages."""
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

    def read(target: Target) -> None:
        target.read(target.first_reads([p.node for p in found.values() if p is not target]))
        target.read(target.second_reads())

    pool = ThreadPoolExecutor(max_workers=len(found))
    reads = [pool.submit(read, target) for target in found.values()]
    pool.shutdown(wait=False)
    return found, reads


@pytest.fixture(scope="session")
def cluster(pytestconfig: pytest.Config) -> Cluster:
    return pytestconfig.halo_cluster  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def targets(pytestconfig: pytest.Config) -> dict[str, Target]:
    found, reads = pytestconfig.halo_targets  # type: ignore[attr-defined]
    wait(reads)
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
