"""`--limit` and `--exclude` on the read commands (issue 35, item 6): an unknown node refused in
one line naming the option and the quoted value, with the command's usage error, before any host
is contacted; status, drift, verify and where read only the nodes left in and name those left
out in one line; bench, whose run spans every node, refuses a selection that leaves one out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from halo_cluster.config import state
from halo_cluster.config.quoting import quote
from halo_cluster.tools import cli, project, selection
from halo_cluster.tools.commands import NAMES, command, exits
from halo_cluster.tools.status import read

# two nodes that refuse connections at once (port 1 of loopback addresses)
NODES = "".join(
    f"  - {{name: halo{i}, ssh: {{host: 127.0.0.{i}, port: 1}}, data: {{interface: auto}}}}\n"
    for i in (1, 2)
)
SERVING = "cluster_user: vllm\nserve: {enabled: true, model: Qwen/Qwen3-14B}\nnodes:\n" + NODES
UNKNOWN = "--limit 'halo9': no such node in cluster.yml (its nodes: halo1, halo2)"
LEFT_OUT = "left out by --limit/--exclude: halo2 (not read)"
READ_COMMANDS = ("status", "drift", "verify", "where", "bench")


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cluster.yml"
    path.write_text(SERVING)
    monkeypatch.setenv("CLUSTER_CONFIG", str(path))
    monkeypatch.delenv(state.ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    return path


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("status", exits.ERROR),
        ("drift", exits.ERROR),
        ("where", exits.ERROR),
        ("bench", exits.ERROR),
        ("verify", exits.NO_CHECKS),  # pytest's usage error, verify's (exits.py)
    ],
)
def test_an_unknown_node_is_one_line_with_the_usage_error_before_any_host(
    config: Path, capsys: pytest.CaptureFixture[str], name: str, code: int
) -> None:
    assert cli.main([name, "--limit", "halo9"]) == code
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == f"halo-cluster {name}: {UNKNOWN}", err
    assert "Connection refused" not in err  # no node was contacted


def test_where_names_the_nodes_left_out(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["where", "--exclude", "halo2"]) == exits.OK
    assert capsys.readouterr().err == f"halo-cluster where: {LEFT_OUT}\n"
    assert cli.main(["where", "--limit", "halo1", "--limit", "halo2"]) == exits.OK
    assert capsys.readouterr().err == ""


def test_status_reads_only_the_nodes_left_in(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["status", "--json", "--exclude", "halo2"]) == exits.ERROR  # halo1 refuses
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert [n["name"] for n in document["nodes"]] == ["halo1"] and document["left_out"] == ["halo2"]
    assert f"halo-cluster status: {LEFT_OUT}" in err.splitlines()


def statuses(*nodes: tuple[str, str, bool]) -> list[read.NodeStatus]:
    """Reachable nodes, every unit active, Ray alive where `ray` says so; the head serving."""
    found = []
    for name, role, ray in nodes:
        unit = read.Unit("halo-ray", "active")
        node = read.NodeStatus(name, role, "", ray="alive" if ray else "unknown", units=[unit])
        node.vllm = {"health": 200} if role == "head" else {}
        found.append(node)
    return found


def test_status_judges_only_the_selected_nodes(config: Path) -> None:
    """With the head left out Ray and vLLM are not read (their fields stay unknown): the worker's
    own services judge; with the head in, Ray must see every selected node."""
    cluster = project.load(config)  # serving through Ray, the default launcher
    assert read.exit_code(cluster, statuses(("halo2", "worker", False))) == read.UP
    assert read.exit_code(cluster, statuses(("halo1", "head", True))) == read.UP
    both = statuses(("halo1", "head", True), ("halo2", "worker", False))
    assert read.exit_code(cluster, both) == read.DOWN


def test_drift_plans_only_the_nodes_left_in(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "drift.json"
    code = cli.main(["drift", "--exclude", "halo2", "--json-out", str(out)])
    assert code == exits.ERROR  # halo1 refuses connections
    summary = json.loads(out.read_text())
    assert list(summary["nodes"]) == ["halo1"] and summary["left_out"] == ["halo2"]
    assert f"halo-cluster drift: {LEFT_OUT}" in capsys.readouterr().err.splitlines()


def test_verify_checks_only_the_nodes_left_in(config: Path) -> None:
    """In its own interpreter: verify runs pytest in its process."""
    argv = [sys.executable, "-m", "halo_cluster.tools.cli", "verify", "--json", "--exclude"]
    run = subprocess.run(
        [*argv, "halo2"], capture_output=True, text=True, timeout=120, env=dict(os.environ)
    )
    assert run.returncode == exits.ERROR, run.stdout + run.stderr  # halo1 refuses
    document = json.loads(run.stdout)
    assert list(document["nodes"]) == ["halo1"] and document["left_out"] == ["halo2"]
    assert f"halo-cluster verify: {LEFT_OUT}" in run.stderr.splitlines()
    assert "halo2" not in {check["where"] for check in document["checks"]}


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--exclude", "halo1"], "--exclude 'halo1': bench runs on the head, halo1"),
        (["--limit", "halo2"], "--limit without the head (halo1): bench runs on the head"),
        (["--exclude", "halo2"], "halo2 left out: vLLM serves across every node"),
    ],
)
def test_bench_refuses_a_node_left_out_saying_why(
    config: Path, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    assert cli.main(["bench", *args]) == exits.ERROR
    err = capsys.readouterr().err
    assert err.startswith(f"halo-cluster bench: {said}") and err.count("\n") == 1, err


def test_every_read_command_documents_both_options() -> None:
    for name in READ_COMMANDS:
        page = command(name).HELP
        for typed, what in selection.OPTIONS:
            assert f"  {typed}" in page and what in page, (name, typed)
        about = " ".join(page.split())  # what they mean for this command, in its text
        assert "--limit or --exclude" in about or "--limit and --exclude" in about, name
    assert set(READ_COMMANDS) <= set(NAMES)


@pytest.mark.parametrize(
    "given", [["--limit", "halo9"], ["--limit=halo9"], ["--limit", "halo*"], ["--limit", "workers"]]
)
def test_the_deploy_takes_names_as_every_command_does_refusing_before_pyinfra(
    config: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    given: list[str],
) -> None:
    """Issue 45 item 11: pyinfra reads `--limit` as a group or a glob and deploys nothing, exit
    0, for a name it does not match; the deploy refuses it as the other commands do, in one
    line with its usage error (2), and pyinfra never starts."""
    monkeypatch.setattr(subprocess, "run", lambda *_, **__: pytest.fail("pyinfra ran"))
    assert cli.main(["deploy", "--yes", *given]) == exits.USAGE
    err = capsys.readouterr().err.splitlines()
    name = given[-1].partition("=")[2] if "=" in given[-1] else given[-1]
    assert err == [
        f"halo-cluster deploy: --limit {quote(name)}: no such node in cluster.yml "
        "(its nodes: halo1, halo2)"
    ]


def test_the_deploy_hands_pyinfra_each_name_as_it_matches_only_that_node(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node named `workers` is that node for pyinfra too, not the group `workers` (the
    inventory's, inventory.py), and each name matches itself alone in pyinfra's own matching."""
    from pyinfra.api import Inventory
    from pyinfra_cli.cli import _get_inventory_pattern_matches

    from halo_cluster.tools.commands import deploy

    config.write_text(SERVING.replace("halo2", "workers"))
    seen: list[list[str]] = []
    monkeypatch.setattr(deploy, "_deploy_once", lambda _, args: seen.append(args) or (0, []))
    assert cli.main(["deploy", "--yes", "--limit", "workers", "--exclude=halo1"]) == exits.OK
    assert seen == [["--yes", "--limit", "[w]orkers", "--exclude=[h]alo1"]]
    inventory = Inventory(
        (["halo1", "workers", "halo10"], {}),
        head=(["halo1"], {}),
        workers=(["workers", "halo10"], {}),
    )
    for name in ("workers", "halo1"):
        found = _get_inventory_pattern_matches(inventory, [selection.pyinfra_name(name)], "-")
        assert [host.name for host in found] == [name]
    assert len(_get_inventory_pattern_matches(inventory, ["workers"], "-")) == 2  # pyinfra's
