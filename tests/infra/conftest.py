"""Verification of the end state with pytest-testinfra, on any inventory: the lab or real nodes.

Hosts come from the same cluster.yml as the deploy ($CLUSTER_CONFIG, default cluster.yml), through
the same loader; SSH uses the config's keys and pinned known_hosts. A check that needs hardware
this node cannot have (RDMA in a container) reads NOT VERIFIED, never passed; the summary at the
end shows passed / FAILED / NOT VERIFIED per node and check, with measured values.

Each node's SSH is probed once before the checks (halo_cluster/tools/reach.py): a node that
cannot be reached is one line naming it and SSH's reason, its checks (and those that need it)
are not run, and the run exits 1. `--json` prints the summary as one JSON document on stdout
(pytest's own lines go to stderr then).
"""

from __future__ import annotations

import inspect
import re
import sys
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path

import _pytest.config
import pytest
import testinfra

from halo_cluster.config.loader import ConfigError
from halo_cluster.config.model import Cluster
from halo_cluster.tools import jsonout, project, reach, selection, sshconfig
from halo_cluster.tools.commands.exits import BAD_CONFIG, NO_CHECKS

from .target import NOT_VERIFIED, WARN, Target

SERVING = "test_serving.py"  # the serving checks' module: collected only where the config serves


def config_path() -> Path:
    return Path(project.config())


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--json", action="store_true", help="the summary as JSON on stdout")
    for name, metavar, what in selection.declared():
        parser.addoption(name, metavar=metavar, action="append", default=[], help=what)


def pytest_configure(config: pytest.Config) -> None:
    summary = Summary()
    config.pluginmanager.register(summary, "halo-summary")
    try:
        config.halo_cluster = project.load(config_path())  # the whole schema, as the tools load it  # type: ignore[attr-defined]
    except ConfigError as error:
        pytest.exit("\n".join(error.problems), returncode=BAD_CONFIG)
    summary.json = config.getoption("json", False)
    cluster: Cluster = config.halo_cluster  # type: ignore[attr-defined]
    try:  # `halo-cluster verify` refused a bad one already; pytest run on its own
        chosen = selection.select(cluster, config.getoption("limit"), config.getoption("exclude"))
    except selection.Refused as refused:
        pytest.exit(f"verify: {refused}", returncode=NO_CHECKS)
    summary.left_out = selection.left_out(cluster, chosen)
    ssh_config = sshconfig.write(cluster, Path(tempfile.mkdtemp(prefix="halo-verify-")))
    by_name = {n.name: n for n in cluster.nodes}
    summary.unreachable = {
        name: reach.said(by_name[name], why)
        for name, why in reach.probe(chosen, ssh_config).items()
    }
    # the nodes are read while pytest collects the checks; those left out never are
    skipped = {*summary.unreachable, *summary.left_out}
    config.halo_targets = read_nodes(cluster, ssh_config, skipped)  # type: ignore[attr-defined]


def _terminal_to_stderr(config: pytest.Config) -> None:
    """pytest's own lines to stderr, for `--json`'s one document on stdout. Its terminal
    writer is the reporter's `_tw` (no public way to move it); its file descriptor cannot be
    moved instead, since pytest's capture puts back the one it saved at its start."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter._tw = _pytest.config.create_terminal_writer(config, sys.stderr)


def read_nodes(
    cluster: Cluster, config: Path, unreachable: set[str]
) -> tuple[dict[str, Target], list[Future]]:
    """A Target per node that answered the probe, and the reads under way: every node at once,
    each in one SSH command (then one more for the commands that name what the first found: the
    data interface, the user's home)."""
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
        if node.name not in unreachable
    }

    def read(target: Target) -> None:
        target.read(target.first_reads([p.node for p in found.values() if p is not target]))
        target.read(target.second_reads())

    pool = ThreadPoolExecutor(max_workers=max(len(found), 1))
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
    """The serving checks run only where the config serves; elsewhere they are not collected.
    The checks of a node that cannot be reached, and those that need it, are not run."""
    cluster: Cluster = config.halo_cluster  # type: ignore[attr-defined]
    summary: Summary = config.pluginmanager.get_plugin("halo-summary")  # type: ignore[assignment]
    # the checks of a node left out (--limit, --exclude), and those that need it, are not run
    out = set(summary.left_out)
    kept = [item for item in items if not needs(cluster, item) & out]
    if not cluster.serve.enabled:
        serving = [item for item in kept if SERVING in item.nodeid]
        kept = [item for item in kept if item not in serving]
        if serving:
            # on stderr: with --json, stdout is the document's alone
            print(f"serving checks left out: serve.enabled is false in {cluster.source}",
                  file=sys.stderr)  # fmt: skip
    kept = launchers_checks(cluster, kept)
    down = set(summary.unreachable)
    if down:
        for item in kept:
            for name in needs(cluster, item) & down:
                summary.not_run[name] = summary.not_run.get(name, 0) + 1
        kept = [item for item in kept if not needs(cluster, item) & down]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in kept])
        items[:] = kept


def launchers_checks(cluster: Cluster, items: list[pytest.Item]) -> list[pytest.Item]:
    """The serving checks of the configured launcher only: Ray's (`test_ray_*`) with `ray`, the
    native world's (`test_native_*`) with `native`; the other's left out, said in one line."""
    if not cluster.serve.enabled:
        return items
    native = cluster.serve.launcher == "native"
    other = "test_ray_" if native else "test_native_"
    left = [item for item in items if SERVING in item.nodeid and item.name.startswith(other)]
    if left and native:  # with Ray, the native checks are simply not this cluster's
        print(f"Ray's checks left out: serve.launcher is native in {cluster.source}",
              file=sys.stderr)  # fmt: skip
    return [item for item in items if item not in left]


def needs(cluster: Cluster, item: pytest.Item) -> set[str]:
    """The nodes a check reads: its parameters' and its fixtures' (`head`), every node for a
    check that takes `targets` itself or one of the head's serving checks (vLLM serves across
    every node). `targets` among all its fixtures says nothing: `node`, `head` and `pair` take
    it to find their own."""
    params = getattr(item, "callspec", None)
    given = params.params if params else {}
    names = {given[k] for k in ("node_name", "worker_name") if k in given}
    names |= set(given.get("pair_names", ()))
    fixtures = getattr(item, "fixturenames", ())
    own = inspect.signature(item.function).parameters if isinstance(item, pytest.Function) else {}
    if "head" in fixtures:
        names.add(cluster.head.name)
    if "targets" in own or ("head" in fixtures and SERVING in item.nodeid):
        names |= {n.name for n in cluster.nodes}
    return names


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    cluster: Cluster = metafunc.config.halo_cluster  # type: ignore[attr-defined]
    names = [n.name for n in cluster.nodes]
    if "reached_name" in metafunc.fixturenames:  # every node chosen, reached or not
        summary: Summary = metafunc.config.pluginmanager.get_plugin("halo-summary")  # type: ignore[assignment]
        chosen = [name for name in names if name not in summary.left_out]
        metafunc.parametrize("reached_name", chosen, ids=chosen)
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
        status = next((s for s in (NOT_VERIFIED, WARN) if reason.startswith(f"{s}: ")), "skipped")
        return where, check, status, reason.removeprefix(f"{status}: ")
    message = (
        str(report.longrepr.reprcrash.message) if hasattr(report.longrepr, "reprcrash") else ""
    )
    first = message.splitlines()[0] if message else ""
    return where, check, "FAILED", first.removeprefix("AssertionError: ")


class Summary:
    """Collects every check's outcome and prints the per-node table at the end (as JSON with
    `--json`), after one line per node that cannot be reached."""

    def __init__(self) -> None:
        self.reports: list[pytest.TestReport] = []
        self.unreachable: dict[str, str] = {}  # node: its one line (reach.py)
        self.left_out: list[str] = []  # the nodes --limit and --exclude leave out: not read
        self.not_run: dict[str, int] = {}  # node: how many checks were not run for it
        self.json = False  # --json: the summary as one JSON document on stdout
        self.exit_code = 0

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.json:  # the terminal reporter exists by now (not yet in the conftest's configure)
            _terminal_to_stderr(session.config)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and not report.passed):
            self.reports.append(report)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # a node not reached is a failed verification, even when nothing else was left to run
        if self.unreachable and session.exitstatus in (pytest.ExitCode.OK, 5):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        self.exit_code = int(session.exitstatus)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        rows = [_row(r) for r in self.reports]
        write = terminalreporter.write_line
        if self.unreachable:
            write("")
        for name, line in self.unreachable.items():
            write(f"{line}: {self.not_run.get(name, 0)} checks not run")
        if not rows:
            return
        write("")
        write(f"halo-cluster verification of {config_path()}")
        width = max(len(r[1]) for r in rows)
        for where, check, status, detail in sorted(rows):
            write(f"  {where:16} {check:{width}}  {status:12}  {detail}"[:220])
        counts = _counts(rows)
        write(
            f"verification: {counts['passed']} passed, {counts['FAILED']} FAILED, "
            f"{counts[NOT_VERIFIED]} NOT VERIFIED (hardware this machine cannot have), "
            f"{counts[WARN]} WARN (reported, not failed)"
            + (f", {len(self.unreachable)} node(s) not reached" if self.unreachable else "")
        )

    def document(self, cluster: Cluster | None) -> dict:
        """The summary as --json prints it: a node not reached has its checks null."""
        rows = [_row(r) for r in self.reports]
        nodes: dict[str, dict] = {}
        for node in cluster.nodes if cluster else ():
            if node.name in self.left_out:
                continue
            if node.name in self.unreachable:
                line = self.unreachable[node.name]
                nodes[node.name] = {"reachable": False, "reason": line, "checks": None}
            else:
                own = [r for r in rows if r[0] == node.name]
                nodes[node.name] = {"reachable": True, "reason": None, "checks": _counts(own)}
        checks = [dict(zip(("where", "check", "status", "detail"), r, strict=True)) for r in rows]
        return {
            "exit_code": self.exit_code,
            "config": str(config_path()),
            "counts": _counts(rows),
            "nodes": nodes,
            "left_out": self.left_out,
            "checks": sorted(checks, key=lambda c: (c["where"], c["check"])),
        }

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.json:
            jsonout.emit("verify", self.document(getattr(config, "halo_cluster", None)))


def _counts(rows: list[tuple[str, str, str, str]]) -> dict[str, int]:
    statuses = ("passed", "FAILED", NOT_VERIFIED, WARN)
    return {s: sum(1 for r in rows if r[2] == s) for s in statuses}
