"""Every refusal of every command shows a hostile value safely (issue 34, items 4 and 5).

The value holds ESC, a newline and 5,000 characters. It is given as each option's value, as an
unknown argument, as the config's path, in a key of cluster.yml and in the lock; each command
runs in this process (`cli.main`) against a config whose nodes are on a closed loopback port.
Its output must be one printable line per refusal (no raw ESC or control character, no forged
second line), at most LINE_MAX characters, no traceback, with the command's exit code for an
error; an option's refusal comes before the config is read, and no refusal starts a process.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from halo_cluster.tools import cli, options, project
from halo_cluster.tools.commands import exits

HOSTILE = "\x1b[2J\n" + "x" * 5000
SHOWN = "'\\x1b[2J\\nxxx"  # how the quoting starts it: escaped, in quotes
LINE_MAX = 300
TARGET = "6.18.9-200.fc43"
# each command that reads the config, as it is run, and its exit code for an error (docs/ci.md)
COMMANDS = {
    "status": ["status"],
    "where": ["where"],
    "drift": ["drift", "--json-out", os.devnull],
    "bench": ["bench"],
    "upgrade": ["upgrade"],
    "rollback": ["rollback"],
    "upgrade --os": ["upgrade", "--os", "--kernel", TARGET],
}


def closed_port() -> int:
    """A loopback port nothing listens on: whatever tried to reach a node would fail at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def config_text(port: int) -> str:
    return f"""\
cluster_user: vllm
ssh: {{user: root, port: {port}, key: ssh/id_ed25519, known_hosts: ssh/known_hosts}}
nodes:
  - {{name: node1, ssh: {{host: 127.0.0.1}}, data: {{interface: enp1s0f0np0}}}}
  - {{name: node2, ssh: {{host: 127.0.0.2}}, data: {{interface: enp1s0f0np0}}}}
serve: {{enabled: true, model: facebook/opt-125m}}
"""


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A valid cluster.yml with its SSH files, named by $CLUSTER_CONFIG; no process may start
    and each read of a config is counted (`reads`)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ssh").mkdir()
    for name in ("id_ed25519", "known_hosts"):
        (tmp_path / "ssh" / name).write_text("x\n")
    path = tmp_path / "cluster.yml"
    path.write_text(config_text(closed_port()))
    monkeypatch.setenv("CLUSTER_CONFIG", str(path))
    monkeypatch.setattr(project, "ROOT", tmp_path)

    def started(argv, *_, **__):
        raise AssertionError(f"a refusal started {argv!r}")

    monkeypatch.setattr(subprocess, "Popen", started)
    return path


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = project.load_cluster
    monkeypatch.setattr(project, "load_cluster", lambda path: seen.append(path) or real(path))
    return seen


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """The exit code and output lines of `halo-cluster ARGV`, checked: each line printable
    (no ESC, no forged line), at most LINE_MAX characters besides the folder, no traceback."""
    try:
        code = cli.main(argv)
    except SystemExit as stop:
        code = stop.code
    captured = capsys.readouterr()
    lines = (captured.out + captured.err).split("\n")
    lines = lines[:-1] if lines[-1] == "" else lines
    assert lines, f"{argv[:3]}: refused without a word"
    for line in lines:
        assert line.isprintable(), line[:200]
        # the test's own folder aside, which leads every line naming the config
        assert len(line.replace(os.getcwd(), ".")) <= LINE_MAX, line[:200]
        assert "Traceback" not in line, lines
    assert isinstance(code, int), code
    return code, lines


# ---- options: each refused in one line, with the command's code, before the config is read

OPTION_CASES = [
    (["upgrade", "--image", HOSTILE], "halo-cluster upgrade: --image: " + SHOWN),
    (["upgrade", f"--image={HOSTILE}"], "halo-cluster upgrade: --image: " + SHOWN),
    (["upgrade", "--image", "a:1", "--image", HOSTILE], "halo-cluster upgrade: --image given"),
    (["upgrade", "--image", ""], "halo-cluster upgrade: --image: empty value"),
    (["upgrade", "--retr"], "halo-cluster upgrade: '--retr': unknown argument"),
    (["upgrade", "--no-bench", "--no-bench"], "halo-cluster upgrade: --no-bench given twice"),
    (["upgrade", "--os", "--kernel", HOSTILE], "halo-cluster upgrade --os: --kernel: " + SHOWN),
    (
        ["upgrade", "--os", "--firmware", HOSTILE],
        "halo-cluster upgrade --os: --firmware: " + SHOWN,
    ),
    (["upgrade", "--os", "--kernel", ""], "halo-cluster upgrade --os: --kernel: empty value"),
    (
        ["upgrade", "--os", "--firmware", "20260110-1.fc43", "--firmware", "20251125-1.fc43"],
        "halo-cluster upgrade --os: --firmware given twice",
    ),
    (["upgrade", "--os", "--kern", TARGET], "halo-cluster upgrade --os: '--kern': unknown"),
    (["drift", "--json-out", HOSTILE], "halo-cluster drift: --json-out: " + SHOWN),
    (["drift", "--md-out", HOSTILE], "halo-cluster drift: --md-out: " + SHOWN),
    (["bench", "--comp"], "halo-cluster bench: '--comp': unknown argument"),
    (["bench", f"--compare={HOSTILE}"], "halo-cluster bench: "),
    (["status", f"--json={HOSTILE}"], "halo-cluster status: "),
    *(
        ([*argv[:1], *(["--os"] if name == "upgrade --os" else []), HOSTILE], "halo-cluster")
        for name, argv in COMMANDS.items()
    ),
    *(([*argv, f"--x={HOSTILE}"], "halo-cluster") for argv in COMMANDS.values()),
]


@pytest.mark.parametrize(("argv", "starts"), OPTION_CASES, ids=range(len(OPTION_CASES)))
def test_a_bad_option_is_one_safe_line_before_the_config_is_read(
    argv: list[str], starts: str, config: Path, reads: list[str], capsys
) -> None:
    code, lines = refused(argv, capsys)
    assert (code, len(lines), reads) == (1, 1, []), lines
    assert lines[0].startswith(starts), lines[0][:200]
    assert not starts.endswith(SHOWN) or "... (5005 characters)" in lines[0], lines[0]


TOP_CASES = [
    [HOSTILE],
    ["--config", HOSTILE, "status"],
    ["deploy", f"--config={HOSTILE}"],
    ["verify", "--config", ""],
    ["--config", "a.yml", "where", "--config", "b.yml"],
    [f"--{HOSTILE}", "status"],
]


@pytest.mark.parametrize("argv", TOP_CASES, ids=range(len(TOP_CASES)))
def test_halo_clusters_own_usage_error_is_one_safe_line_with_exit_2(
    argv: list[str], config: Path, reads: list[str], capsys
) -> None:
    code, lines = refused(argv, capsys)
    assert (code, len(lines), reads) == (exits.USAGE, 1, []), lines
    assert lines[0].startswith("halo-cluster: "), lines[0][:200]


# ---- the config and the lock: each problem one safe line naming the file, exit 1

CONFIG_CASES = {
    "image": lambda text: text + f"image: {json.dumps(HOSTILE)}\n",
    "model": lambda text: text.replace("facebook/opt-125m", json.dumps(HOSTILE)),
    "node name": lambda text: text.replace("name: node1", f"name: {json.dumps(HOSTILE)}"),
    "cluster_user": lambda text: text.replace("cluster_user: vllm", "cluster_user: '\u0430'"),
    "unknown key": lambda text: text + f"{json.dumps(HOSTILE)}: 1\n",
    "bench": lambda text: text + f"bench: {{tolerance: {json.dumps(HOSTILE)}}}\n",
    "known version": lambda text: (
        text
        + (
            "os:\n  known_versions:\n    - {package: kernel-core, versions: ["
            f"{json.dumps(HOSTILE)}], verdict: bad, symptom: {json.dumps(HOSTILE)}, "
            f"source: {json.dumps(HOSTILE)}, date: '2026-01-01'}}\n"
        )
    ),
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", CONFIG_CASES)
def test_a_hostile_config_value_is_refused_in_safe_lines(
    command: str, case: str, config: Path, capsys
) -> None:
    config.write_text(CONFIG_CASES[case](config.read_text()))
    code, lines = refused(COMMANDS[command], capsys)
    assert code == 1, lines
    assert all(line.removeprefix("drift: error: ").startswith(f"{config}: ") for line in lines)


def test_the_look_alike_is_named_by_code_point(config: Path, capsys) -> None:
    config.write_text(CONFIG_CASES["cluster_user"](config.read_text()))
    _, lines = refused(["where"], capsys)
    assert "'\u0430' (U+0430 CYRILLIC SMALL LETTER A at 1)" in lines[0], lines


@pytest.mark.parametrize("command", COMMANDS)
def test_a_hostile_config_path_is_refused_in_one_safe_line(
    command: str, config: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("CLUSTER_CONFIG", HOSTILE)
    code, lines = refused(COMMANDS[command], capsys)
    assert code == 1 and len(lines) == 1, lines
    assert "the config's path: " in lines[0] and "(5005 characters)" in lines[0], lines


@pytest.mark.parametrize("command", COMMANDS)
def test_a_hostile_lock_is_refused_in_safe_lines(command: str, config: Path, capsys) -> None:
    (config.parent / "halo-cluster.lock").write_text(json.dumps({"format": HOSTILE}))
    code, lines = refused(COMMANDS[command], capsys)
    assert code == 1, lines
    assert all("halo-cluster.lock: " in line for line in lines), lines


def test_a_long_plain_value_keeps_the_rules_reason_and_is_quoted_once(
    config: Path, reads: list[str], capsys
) -> None:
    """The tool's own sentence is already safe: only the value is cut, its reason stays."""
    code, lines = refused(["upgrade", "--image", "docker.io/a/b:" + "a" * 5000], capsys)
    assert (code, len(lines), reads) == (1, 1, []), lines
    assert lines[0].startswith("halo-cluster upgrade: --image: 'docker.io/a/b:aaa"), lines[0]
    assert "'... (5014 characters) is not an image reference" in lines[0], lines[0]
    assert "a tag is" in lines[0] and '"' not in lines[0], lines[0]


@pytest.mark.parametrize("value", [HOSTILE, "m" * 5000])
def test_argparses_own_message_quotes_the_value_and_keeps_its_sentence(value: str, capsys) -> None:
    parser = options.parser("halo-cluster x", None, 1)
    parser.add_argument("--mode", choices=["a", "b"])
    with pytest.raises(SystemExit) as stopped:
        parser.parse_args(["--mode", value])
    line = capsys.readouterr().err
    assert stopped.value.code == 1 and line.count("\n") == 1, line
    assert line.startswith("halo-cluster x: argument --mode: invalid choice: "), line
    assert "... (5" in line and "(choose from" in line and len(line) < LINE_MAX, line


def test_an_image_other_than_the_configs_is_refused_before_any_host(config: Path, capsys):
    code, lines = refused(["upgrade", "--image", "docker.io/other/image:1"], capsys)
    assert (code, len(lines)) == (1, 1), lines
    assert lines[0].startswith(
        "halo-cluster upgrade: --image 'docker.io/other/image:1' is not cluster.yml's image"
    )


@pytest.mark.parametrize("command", ["deploy", "verify"])
def test_the_commands_run_elsewhere_refuse_a_hostile_config_path_safely(
    command: str, tmp_path: Path
) -> None:
    """deploy's pyinfra and verify's pytest load the config themselves: their refusal too."""
    done = subprocess.run(
        # deploy's --yes: without a terminal it would refuse before the config is read
        [
            sys.executable,
            "-m",
            "halo_cluster.tools.cli",
            command,
            *(["-y"] * (command == "deploy")),
        ],
        env=dict(os.environ, CLUSTER_CONFIG=HOSTILE),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0 and "the config's path: " in output, output
    assert "Traceback" not in output, output
    assert all(line.isprintable() and len(line) <= LINE_MAX for line in output.splitlines())
    assert "\x1b" not in output


def test_the_options_problem_is_the_one_wording() -> None:
    assert options.problem("--image", "a", 2) == "--image given twice"
    assert options.problem("--image", "", 1).startswith("--image: empty value")
    assert options.problem("--image", None, 1) is None
    assert options.problem("--x", "v", 1, lambda v: f"{v} is wrong") == "--x: v is wrong"
