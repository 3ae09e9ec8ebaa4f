"""`halo-cluster`: exit codes reach the caller unchanged; `where` says where the cluster is."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from halo_cluster.tools import cli, project
from halo_cluster.tools.commands import NAMES, command, deploy, exits, verify

ROOT = Path(__file__).resolve().parents[2]
# the lab's config as `python -m lab up` writes it, with lab/serve.yml appended (make demo SERVE=1)
LAB_CONFIG = """interconnect: roce
subnet: 192.168.100.0/30
cluster_user: vllm
ssh: {user: root, port: 22, key: ssh/id_ed25519, known_hosts: ssh/known_hosts}
nodes:
  - name: node1
    ssh: {host: 10.99.1.2}
    data: {interface: enp1s0f0np0}
  - name: node2
    ssh: {host: 10.99.2.2}
    data: {interface: enp1s0f0np0}
serve:
  enabled: true
  model: facebook/opt-125m
"""


@pytest.fixture(autouse=True)
def no_config_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """main() sets $CLUSTER_CONFIG for what it starts: restored after each test."""
    monkeypatch.setenv("CLUSTER_CONFIG", "")
    monkeypatch.delenv("CLUSTER_CONFIG")


@pytest.fixture(autouse=True)
def no_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """The deploy probes the lab's nodes beside its pyinfra (reach.meanwhile): not here, where
    pyinfra's run is stood in for and the lab's addresses lead nowhere."""
    from halo_cluster.tools import reach

    monkeypatch.setattr(reach, "probe_names", lambda *_: {})


@pytest.fixture
def lab_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`.lab/cluster-serve.yml` under a project-like current directory, with its SSH files."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".lab" / "ssh").mkdir(parents=True)
    for name in ("id_ed25519", "known_hosts"):
        (tmp_path / ".lab" / "ssh" / name).write_text("x\n")
    return tmp_path / ".lab" / "cluster-serve.yml"


def where(config: Path, capsys: pytest.CaptureFixture[str], extra: str = "") -> list[str]:
    config.write_text(LAB_CONFIG + extra)
    assert cli.main(["where", "--config", ".lab/cluster-serve.yml"]) == 0
    return capsys.readouterr().out.splitlines()


def test_console_script_is_declared() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"halo-cluster": "halo_cluster.tools.cli:main"}


@pytest.mark.parametrize("command", ["status", "drift", "where"])
def test_bad_config_exits_1_with_one_line(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.yml"
    args = ["--json-out", "/dev/null"] if command == "drift" else []
    assert cli.main(["--config", str(missing), command, *args]) == 1
    captured = capsys.readouterr()
    lines = (captured.out + captured.err).splitlines()
    assert len(lines) == 1 and lines[0].endswith(
        f"{missing}: cannot read: No such file or directory"
    )


def test_verify_passes_pytests_own_exit_code(tmp_path: Path) -> None:
    """tests/infra stops a bad config with pytest.exit(returncode=BAD_CONFIG), every command's
    code for it, which reaches the caller."""
    script = Path(sys.executable).parent / "halo-cluster"
    if not script.exists():
        pytest.skip("the console script is not installed: pip install -e . (make venv)")
    result = subprocess.run(
        [str(script), "verify", "--config", str(tmp_path / "missing.yml")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == exits.BAD_CONFIG, result.stdout + result.stderr
    assert "missing.yml: cannot read" in result.stdout + result.stderr


PLUGINS_SEEN = """
def test_plugins(pytestconfig):
    manager = pytestconfig.pluginmanager
    print("PLUGINS", *sorted(filter(None, map(manager.get_name, manager.get_plugins()))))
"""


def test_the_verifications_pytest_loads_testinfra_and_none_of_the_unused_plugins(
    tmp_path: Path,
) -> None:
    """The start-up options (`verify.PYTEST_OPTIONS`) leave out what they name, on this pytest: a
    plugin renamed by an upgrade, or one autoloaded again, would fail here, not slow verify."""
    from _pytest.config import default_plugins

    assert set(verify.UNUSED_PLUGINS) <= set(default_plugins)
    (tmp_path / "test_seen.py").write_text(PLUGINS_SEEN)
    result = subprocess.run(
        [sys.executable, *verify.VERIFY, "-s", "-c", "/dev/null", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("PLUGINS"))
    loaded = set(line.split()[1:])
    assert "testinfra.plugin" in loaded and "junitxml" in loaded
    assert not loaded & {*verify.UNUSED_PLUGINS, "hypothesispytest", "typeguard"}, loaded


@pytest.mark.parametrize(
    ("command", "args", "code"),
    [("verify", [], exits.NO_CHECKS), ("drift", [], 1), ("deploy", ["-y"], 1)],
)
def test_outside_a_checkout_says_so_in_one_line(
    command: str, args: list[str], code: int, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.setattr(project, "checkout", lambda: None)
    assert cli.main([command, *args]) == code
    error = capsys.readouterr().err.splitlines()
    assert len(error) == 1 and error[0].startswith(f"halo-cluster {command}: no checkout")
    assert "tests/infra/conftest.py" in error[0]


def test_verify_without_pytest_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = verify.importlib.util.find_spec
    monkeypatch.setattr(
        verify.importlib.util, "find_spec", lambda name: None if name == "pytest" else real(name)
    )
    assert cli.main(["verify"]) == exits.NO_CHECKS
    assert "halo-cluster[test]" in capsys.readouterr().err


def test_config_before_or_after_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    monkeypatch.setattr(command("drift"), "main", lambda args: seen.append(args) or 2)
    assert cli.main(["drift", "--config", "a.yml", "--json-out", "x"]) == 2
    assert cli.os.environ["CLUSTER_CONFIG"] == "a.yml"
    assert cli.main(["--config=b.yml", "drift"]) == 2
    assert cli.os.environ["CLUSTER_CONFIG"] == "b.yml"
    assert seen == [["--json-out", "x"], []]


def test_a_double_dash_ends_halo_clusters_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """`deploy --config X -- --dry` is pyinfra's --dry, not an inventory named `--dry`."""
    seen = []
    monkeypatch.setattr(deploy, "main", lambda args: seen.append(args) or 0)
    assert cli.main(["deploy", "--config", "a.yml", "--", "--dry"]) == 0
    assert cli.main(["deploy", "--dry", "--", "--config", "pyinfra.yml", "--"]) == 0
    assert cli.os.environ["CLUSTER_CONFIG"] == "a.yml"
    assert seen == [["--dry"], ["--dry", "--config", "pyinfra.yml", "--"]]


def test_where_on_the_lab_runs_curl_on_the_head(
    lab_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    serving, curl, status = where(lab_config, capsys)
    assert serving == (
        "serving facebook/opt-125m at http://192.168.100.1:8000 "
        "(the head's data address, node node1)"
    )
    # the data address is on the lab's data link: the line runs curl on the head over SSH
    ssh = shlex.split(curl.removeprefix("try it:  "))
    assert ssh[:-1] == [
        "ssh",
        "-i",
        ".lab/ssh/id_ed25519",
        "-o",
        "UserKnownHostsFile=.lab/ssh/known_hosts",
        "root@10.99.1.2",
    ]
    remote = shlex.split(ssh[-1])  # as the head's shell splits it
    assert remote[:3] == ["curl", "-s", "http://192.168.100.1:8000/v1/completions"]
    assert json.loads(remote[remote.index("-d") + 1])["model"] == "facebook/opt-125m"
    assert status == "status:  halo-cluster status --config .lab/cluster-serve.yml"


def test_where_reads_the_key_file_and_never_prints_the_key(
    lab_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (lab_config.parent / "api.key").write_text("sk-secret-never-shown\n")
    extra = "  listen: all\n  api_key_file: api.key\n"
    serving, curl, _ = where(lab_config, capsys, extra)
    assert "at http://10.99.1.2:8000 (every address of the head" in serving
    assert curl.startswith(
        "try it:  printf 'Authorization: Bearer %s\\n' \"$(cat .lab/api.key)\" | "
        "curl -s http://10.99.1.2:8000/v1/completions -H 'Content-Type: application/json' -H @- "
    )
    assert "sk-secret" not in serving + curl


def test_where_when_not_serving(lab_config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lab_config.write_text(LAB_CONFIG.replace("enabled: true", "enabled: false"))
    assert cli.main(["--config", str(lab_config), "where"]) == 0
    assert capsys.readouterr().out.startswith("not serving: serve.enabled is false in ")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--config=", "drift"], "--config: empty value"),
        (["--config", "", "drift"], "--config: empty value"),
        (["drift", "--config="], "--config: empty value"),
        (["drift", "--config", ""], "--config: empty value"),
        (["--config", "a.yml", "--config", "b.yml", "drift"], "--config given twice"),
        (["--config", "a.yml", "drift", "--config=b.yml"], "--config given twice"),
        (["--config", "a\x1b\nb", "drift"], "--config: 'a\\x1b\\nb' is not a file path"),
        (["drift", "--config"], "--config needs a PATH"),
    ],
)
def test_an_empty_or_repeated_config_is_an_error_naming_the_option(
    argv: list[str], message: str, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """Never a silent fallback to $CLUSTER_CONFIG, never the last of two winning."""
    monkeypatch.setenv("CLUSTER_CONFIG", "from-the-environment.yml")
    ran = []
    monkeypatch.setattr(command("drift"), "main", lambda args: ran.append(args) or 0)
    with pytest.raises(SystemExit) as stopped:
        cli.main(argv)
    assert stopped.value.code == 2 and ran == []
    assert capsys.readouterr().err.startswith(f"halo-cluster: {message}")
    assert cli.os.environ["CLUSTER_CONFIG"] == "from-the-environment.yml"


def test_usage_names_only_what_a_user_types(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli.main([])
    err = capsys.readouterr().err
    assert stopped.value.code == exits.USAGE and len(err.splitlines()) == 1
    assert err.startswith(
        "halo-cluster: no COMMAND: give one of init, deploy, drift, verify, status"
    )
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: halo-cluster [--config PATH] [--state DIR] COMMAND [ARGS...]\n")
    assert "args" not in out.replace("ARGS", "")


def test_help_starts_with_what_each_command_does(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    commands = out.index("commands:")
    for name in NAMES:
        assert commands < out.index(f"  {name} ") < out.index("COMMAND --help")
    assert "make" not in out and "docs/" not in out  # a wheel's user has neither


@pytest.mark.parametrize(("extra", "pyinfra_args", "upgraded"), [
    ("image_update: true\n", ["-y"], True),
    ("", ["-y"], False),
    ("image_update: true\n", ["--dry"], False),
    ("image_update: true\n", ["-y", "--limit", "node1"], False),
    ("image_update: true\n", ["-y", "--exclude=node2"], False),
])  # fmt: skip
def test_image_update_runs_the_upgrade_after_a_passed_deploy(
    lab_config: Path, monkeypatch: pytest.MonkeyPatch, extra: str, pyinfra_args: list[str],
    upgraded: bool,
) -> None:  # fmt: skip
    from halo_cluster.tools.upgrading import imagemain

    lab_config.write_text(LAB_CONFIG + extra)
    ran = []
    monkeypatch.setattr(subprocess, "run", lambda argv, **_: subprocess.CompletedProcess(argv, 0))
    monkeypatch.setattr(
        imagemain, "main_upgrade", lambda args, converged: ran.append(converged) or 6
    )
    code = cli.main(["deploy", "--config", str(lab_config), *pyinfra_args])
    assert (code, ran) == ((6, [True]) if upgraded else (0, []))


def test_a_limited_deploy_says_the_upgrade_is_not_run(
    lab_config: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lab_config.write_text(LAB_CONFIG + "image_update: true\n")
    monkeypatch.setattr(subprocess, "run", lambda argv, **_: subprocess.CompletedProcess(argv, 0))
    assert cli.main(["deploy", "--config", str(lab_config), "-y", "--limit", "node1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "halo-cluster deploy: image_update: no upgrade in a run limited to some nodes (--limit, "
        "--exclude), since it moves every node: `halo-cluster upgrade` runs it"
    ]


SKOPEO_LINE = (
    "image: skopeo is not installed on the head (node1) yet: the packages role installs it in "
    "this run, the next run resolves docker.io/kyuz0/vllm-therock-gfx1151:latest"
)


def skopeo_refusals(*nodes: str) -> list[dict]:
    """The events a first run on a fresh head records for `nodes` (the container role's)."""
    return [
        {"node": node, "kind": kind, "reason": SKOPEO_LINE}
        for node in nodes
        for kind in ("skopeo-pending", "refused")
    ]


@pytest.mark.parametrize(("events", "again"), [
    (skopeo_refusals("node1", "node2"), True),
    ([*skopeo_refusals("node1", "node2"), {"node": "node2", "kind": "refused",
                                           "reason": "data port ens1 is down"}], False),
    ([{"node": "node1", "kind": "refused", "reason": SKOPEO_LINE}], False),  # no pending event
    ([{"node": "node1", "kind": "reached"}], False),  # failed, but not refused
])  # fmt: skip
def test_the_deploy_runs_again_only_when_every_refusal_is_the_missing_skopeo(
    events: list[dict], again: bool
) -> None:
    from halo_cluster.node import report

    assert report.only_skopeo_pending(events) is again


def test_a_deploy_refused_only_for_skopeo_runs_once_more(
    lab_config: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """pyinfra's run stood in for: the first writes the fresh head's events to the report
    file the tool names and exits 1, the second passes."""
    lab_config.write_text(LAB_CONFIG)
    runs: list[list[str]] = []

    def pyinfra(argv: list[str], env: dict[str, str], **_) -> subprocess.CompletedProcess:
        runs.append(argv)
        if len(runs) == 1:
            with open(env["HALO_REPORT"], "a") as out:
                out.writelines(json.dumps(e) + "\n" for e in skopeo_refusals("node1", "node2"))
        return subprocess.CompletedProcess(argv, 1 if len(runs) == 1 else 0)

    monkeypatch.delenv("HALO_REPORT", raising=False)
    monkeypatch.setattr(subprocess, "run", pyinfra)
    assert cli.main(["deploy", "--config", str(lab_config), "-y"]) == 0
    assert len(runs) == 2 and runs[0] == runs[1]
    assert capsys.readouterr().err.splitlines() == [
        "halo-cluster deploy: the head had no skopeo yet (installed in this run): deploying once "
        "more to resolve the image"
    ]


def test_a_deploy_refused_for_another_reason_runs_once(
    lab_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lab_config.write_text(LAB_CONFIG)
    runs: list[list[str]] = []
    other = {"node": "node2", "kind": "refused", "reason": "data port ens1 is down"}

    def pyinfra(argv: list[str], env: dict[str, str], **_) -> subprocess.CompletedProcess:
        runs.append(argv)
        with open(env["HALO_REPORT"], "a") as out:
            out.writelines(json.dumps(e) + "\n" for e in [*skopeo_refusals("node1"), other])
        return subprocess.CompletedProcess(argv, 1)

    monkeypatch.delenv("HALO_REPORT", raising=False)
    monkeypatch.setattr(subprocess, "run", pyinfra)
    assert cli.main(["deploy", "--config", str(lab_config), "-y"]) == 1 and len(runs) == 1


def exit_of(argv: list[str]) -> int | str | None:
    """The exit code of `halo-cluster ARGV`, as the console script's caller sees it (a usage
    error leaves by SystemExit)."""
    try:
        return cli.main(argv)
    except SystemExit as stopped:
        return stopped.code


@pytest.mark.parametrize("command", ["where", "status", "drift"])
def test_a_state_that_is_a_file_is_one_line_before_the_work(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    """--state FILE, or a path through a file: one line, exit 2, before the config is read or
    a node contacted; no traceback after the work (issue 45 item 14)."""
    monkeypatch.setenv("HALO_STATE", "")  # restored after: the dispatcher sets it
    monkeypatch.chdir(tmp_path)
    Path("file").write_text("")
    for given, said in (
        ("file", "'file': is a file: give a folder"),
        ("file/below", "'file/below': is inside a file, 'file': give another path"),
    ):
        assert exit_of(["--state", given, command]) == exits.USAGE
        err = capsys.readouterr().err
        assert err.startswith(f"halo-cluster: --state {said}") and err.count("\n") == 1, err
    monkeypatch.setenv("HALO_STATE", "file")
    assert exit_of([command]) == exits.USAGE
    assert capsys.readouterr().err.startswith("halo-cluster: $HALO_STATE 'file': is a file")


def test_drifts_bad_json_out_is_one_line_before_the_dry_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from halo_cluster.tools import drift

    monkeypatch.setattr(drift, "run", lambda *_: pytest.fail("the dry run ran"))
    monkeypatch.chdir(tmp_path)
    Path("file").write_text("")
    Path("folder").mkdir()
    for option, given, said in (
        ("--json-out", "folder", "is a folder: give a file's path"),
        ("--md-out", "file/x.md", "is inside a file, 'file': give another path"),
    ):
        assert exit_of(["drift", option, str(given)]) == exits.ERROR
        err = capsys.readouterr().err
        assert err.startswith(f"halo-cluster drift: {option} '{given}': {said}"), err
        assert err.count("\n") == 1


def test_drift_on_a_missing_config_makes_no_folder_beside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The report goes to the state folder beside cluster.yml; with no cluster.yml there, drift
    says so and makes no folder (issue 45 item 14)."""
    missing = tmp_path / "nowhere" / "cluster.yml"
    assert exit_of(["drift", "--config", str(missing)]) == exits.ERROR
    assert str(missing) in capsys.readouterr().out
    assert not (tmp_path / "nowhere").exists()


def test_verify_refuses_an_option_it_does_not_take_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Not pytest's many-line usage (issue 45 item 14): verify's own line, exit 4."""
    assert exit_of(["verify", "--tb=short"]) == exits.NO_CHECKS
    assert capsys.readouterr().err == (
        "halo-cluster verify: '--tb=short': unknown argument (its options: -k, -x, -v, --json, "
        "--limit, --exclude; --help)\n"
    )
