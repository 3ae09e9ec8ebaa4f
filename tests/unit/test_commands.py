"""`halo-cluster`'s commands as a user meets them: each command's help page, --version, the
completion scripts, NO_COLOR, the deploy without a terminal, init."""

from __future__ import annotations

import io
import os
import pty
import select
import shutil
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import pytest

from halo_cluster.tools import cli, options, project
from halo_cluster.tools.commands import NAMES, command, deploy, exits, init, text
from tests.unit.configs import VALID_ROCE

INTERNAL = ("pyinfra", "pytest", "HALO_REPORT", "design section", "docs/", "make ")
# what a command's parser sees for its help to be read: upgrade's --os form has its own parser
FORMS = {name: [[]] for name in NAMES} | {"upgrade": [[], ["--os"]]}
PASSED_ON = ("deploy", "verify")  # their options go to the tool they run, which has its own


@pytest.mark.parametrize("name", NAMES)
def test_every_help_page_is_written_for_a_user(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main([name, "--help"]) == exits.OK
    page = capsys.readouterr().out
    assert page.startswith(f"usage: halo-cluster {name}")
    assert not [word for word in INTERNAL if word in page], page
    assert "\nExit codes:\n" in page and "halo-cluster " in page.partition("\nExample:\n")[2]
    for code, _ in exits.EXITS[name]:
        assert f"\n  {code}  " in page
    assert all(len(line) <= exits.WIDTH for line in page.splitlines()), page


@pytest.mark.parametrize("name", [*NAMES, ""])
def test_help_wraps_at_the_terminals_width(
    name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """$COLUMNS as a terminal sets it: every line within it, the same words in the same order;
    on a wide terminal the page as it is laid out."""
    argv = [name, "--help"] if name else ["--help"]

    def shown(columns: int) -> str:
        monkeypatch.setenv("COLUMNS", str(columns))
        try:
            assert cli.main(argv) == exits.OK
        except SystemExit as done:  # argparse's own --help
            assert done.code == exits.OK
        return capsys.readouterr().out

    wide, narrow = shown(200), shown(60)
    assert all(len(line) < 60 for line in narrow.splitlines()), narrow
    assert narrow.split() == wide.split() and narrow != wide
    if name:
        assert wide == command(name).HELP + "\n"


class Parsed(Exception):
    """Raised by a command's parser in place of parsing: the parser it built."""


@pytest.mark.parametrize("name", [n for n in NAMES if n not in PASSED_ON])
def test_every_option_a_command_takes_is_on_its_page(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def seen(parser: options.Parser, *_: object) -> None:
        raise Parsed(parser)

    monkeypatch.setattr(options.Parser, "parse_args", seen)
    documented = set(text.names(command(name).OPTIONS))
    for argv in FORMS[name]:
        with pytest.raises(Parsed) as parsed:
            command(name).main(argv)
        taken = {o for a in parsed.value.args[0]._actions for o in a.option_strings}
        assert taken - {"-h", "--help"} <= documented, name


def test_verify_and_deploy_help_need_no_config(tmp_path: Path) -> None:
    """In a folder without cluster.yml, as a new user tries it: the page, exit 0."""
    script = Path(sys.executable).parent / "halo-cluster"
    env = {k: v for k, v in os.environ.items() if k != "CLUSTER_CONFIG"}
    for name in ("verify", "deploy"):
        done = subprocess.run(
            [str(script), name, "--help"], capture_output=True, text=True, cwd=tmp_path, env=env
        )
        assert (done.returncode, done.stderr) == (0, ""), done.stderr
        assert done.stdout.startswith(f"usage: halo-cluster {name}")


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--version"]) == exits.OK
    assert capsys.readouterr().out == f"halo-cluster {version('halo-cluster')}\n"


def script(shell: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert cli.main(["completion", shell]) == exits.OK
    out = capsys.readouterr().out
    assert all(name in out for name in NAMES) and "ssh-key" in out and "no-bench" in out
    return out


def test_bash_completion_parses_and_completes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "halo.bash"
    path.write_text(script("bash", capsys))
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
    # what bash offers after `halo-cluster upgrade --n`, and for the first word `ro`
    probe = (
        f"source {path}; COMP_WORDS=(halo-cluster upgrade --n); COMP_CWORD=2; _halo_cluster; "
        'echo "${COMPREPLY[@]}"; COMP_WORDS=(halo-cluster --config x.yml ro); COMP_CWORD=3; '
        '_halo_cluster; echo "${COMPREPLY[@]}"'
    )
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True)
    assert done.stdout.splitlines() == ["--no-bench", "rollback"], done.stderr


def test_bash_completes_node_names_after_limit_and_shells_after_completion(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The names come from `halo-cluster completion nodes` on the config the line names (the
    script runs the command on PATH: here this checkout's, by a two-line wrapper)."""
    path = tmp_path / "halo.bash"
    path.write_text(script("bash", capsys))
    (tmp_path / "bin").mkdir()
    wrapper = tmp_path / "bin" / "halo-cluster"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -m halo_cluster.tools.cli "$@"\n')
    wrapper.chmod(0o755)
    config = tmp_path / "cluster.yml"
    config.write_text(VALID_ROCE)
    env = {
        **os.environ,
        "PATH": f"{wrapper.parent}:{os.environ['PATH']}",
        "PYTHONPATH": ":".join(sys.path),
    }
    env.pop("CLUSTER_CONFIG", None)
    probes = {
        f"halo-cluster --config {config} deploy --limit ''": ["halo1 halo2"],
        f"halo-cluster drift --config {config} --exclude h": ["halo1 halo2"],
        "halo-cluster --config /nowhere.yml status --limit ''": [""],
        "halo-cluster completion ''": ["--config --state --help bash zsh fish"],
        "halo-cluster completion f": ["fish"],
    }
    for line, offered in probes.items():
        words = line.split(" ")
        probe = (f"source {path}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
                 '_halo_cluster; echo "${COMPREPLY[@]}"')  # fmt: skip
        done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, env=env)
        assert done.stdout.splitlines() == offered, (line, done.stderr)


def test_completion_nodes_prints_the_names_and_nothing_on_a_bad_config(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "cluster.yml"
    config.write_text(VALID_ROCE)
    assert cli.main(["--config", str(config), "completion", "nodes"]) == exits.OK
    assert capsys.readouterr().out == "halo1\nhalo2\n"
    config.write_text("nodes: [{name: 'a b'}, {name: ok}, 3]\n: [")
    assert cli.main(["--config", str(config), "completion", "nodes"]) == exits.OK
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_completion_parse(
    shell: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / f"halo.{shell}"
    path.write_text(script(shell, capsys))
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed here: its script is generated but not parsed")
    assert subprocess.run([shell, "-n", str(path)]).returncode == 0


def test_an_unknown_shell_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli.main(["completion", "tcsh"])
    assert stopped.value.code == exits.ERROR
    assert len(capsys.readouterr().err.splitlines()) == 1


def on_a_terminal(argv: list[str], env: dict[str, str]) -> bytes:
    """What ARGV prints with a terminal as its stdout and stderr, until it exits."""
    primary, secondary = pty.openpty()
    try:
        running = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=secondary, stderr=secondary, env=env
        )
    finally:
        os.close(secondary)
    out, deadline = b"", time.monotonic() + 120
    # until it exits and its output is read: the end of the terminal's input alone is not a
    # sign, since whatever else holds the terminal keeps it open
    while time.monotonic() < deadline:
        if select.select([primary], [], [], 0.2)[0]:
            try:
                out += os.read(primary, 4096)
            except OSError:  # every holder closed the terminal
                break
        elif running.poll() is not None:
            break
    running.kill()
    running.wait()
    os.close(primary)
    return out


def test_no_color_reaches_pyinfra(tmp_path: Path) -> None:
    """pyinfra colours what it prints on a terminal; with NO_COLOR the deploy's pyinfra
    (project.PYINFRA) prints the same lines without escape codes."""
    probe = [
        sys.executable,
        "-c",
        "from halo_cluster.tools import project; print(project.PYINFRA[2])",
    ]
    plain = dict(os.environ, NO_COLOR="1")
    chosen = subprocess.run(probe, capture_output=True, text=True, env=plain).stdout.strip()
    assert chosen == "halo_cluster.tools.nocolor"
    local = ["-y", "@local", "exec", "--", "true"]
    coloured = on_a_terminal([sys.executable, "-m", "pyinfra", *local], dict(os.environ))
    assert b"\x1b[3" in coloured  # the test sees colours where they are on
    assert b"\x1b[3" not in on_a_terminal([sys.executable, "-m", chosen, *local], plain)


def test_a_deploy_without_a_terminal_asks_for_yes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", open(os.devnull))  # noqa: SIM115
    monkeypatch.setattr(subprocess, "run", lambda *_, **__: pytest.fail("it ran"))
    assert cli.main(["deploy"]) == exits.USAGE
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "--yes" in err[0]
    for answered in (["-y"], ["--yes"], ["--dry"], ["-vy"]):
        assert not deploy.asks(answered), answered
    assert deploy.asks(["-v", "--limit", "node1"])


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home with an ed25519 key, the current folder empty."""
    (tmp_path / "home" / ".ssh").mkdir(parents=True)
    (tmp_path / "home" / ".ssh" / "id_ed25519").write_text("key\n")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    monkeypatch.delenv("CLUSTER_CONFIG", raising=False)
    return tmp_path / "home"


def test_init_writes_a_config_where_accepts(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["init", "10.0.0.11", "10.0.0.12", "10.0.0.13"]) == exits.OK
    written = Path("cluster.yml")
    cluster = project.load(written)
    assert [n.ssh_host for n in cluster.nodes] == ["10.0.0.11", "10.0.0.12", "10.0.0.13"]
    assert cluster.head.ssh_host == "10.0.0.11"
    assert cluster.nodes[0].ssh_key == str(home / ".ssh" / "id_ed25519")
    assert written.read_text().count("#") > 10  # the example's comments kept
    capsys.readouterr()
    assert cli.main(["where", "--config", str(written)]) == exits.OK
    assert "serve.enabled is false" in capsys.readouterr().out


def test_init_refuses_to_overwrite_and_takes_the_given_key(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("cluster.yml").write_text("mine\n")
    assert cli.main(["init", "10.0.0.11"]) == exits.ERROR
    assert "--force" in capsys.readouterr().err and Path("cluster.yml").read_text() == "mine\n"
    Path("my_key").write_text("key\n")
    assert cli.main(["init", "10.0.0.11", "--ssh-key", "my_key", "--force"]) == exits.OK
    assert project.load("cluster.yml").nodes[0].ssh_key == str(Path("my_key").resolve())


def test_init_without_a_key_or_with_a_bad_address_writes_nothing(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / ".ssh" / "id_ed25519").unlink()
    assert cli.main(["init", "10.0.0.11"]) == exits.ERROR
    assert "--ssh-key" in capsys.readouterr().err
    (home / ".ssh" / "id_rsa").write_text("key\n")
    assert cli.main(["init", "10.0.0.11", "10.0.0.11"]) == exits.ERROR
    err = capsys.readouterr().err
    assert "cluster.yml" in err and ".cluster." not in err
    assert os.listdir() == []


def test_init_widens_the_subnet_for_more_nodes() -> None:
    assert str(init.subnet(2)) == "192.168.100.0/30"
    assert str(init.subnet(3)) == "192.168.100.0/29"
    assert str(init.subnet(7)) == "192.168.100.0/28"


def test_init_writes_the_config_named_by_config_or_the_environment(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`init` takes --config as every command does, and $CLUSTER_CONFIG (issue 45 item 14); a
    folder or a missing folder is one line, nothing written."""
    Path("sub").mkdir()
    assert cli.main(["init", "10.0.0.11", "--config", "sub/mine.yml"]) == exits.OK
    assert project.load("sub/mine.yml").head.ssh_host == "10.0.0.11"
    assert "next: halo-cluster deploy --dry --config " in capsys.readouterr().out
    monkeypatch.setenv("CLUSTER_CONFIG", "sub/env.yml")
    assert cli.main(["init", "10.0.0.12"]) == exits.OK
    assert project.load("sub/env.yml").head.ssh_host == "10.0.0.12"
    assert not Path("cluster.yml").exists()
    capsys.readouterr()
    assert cli.main(["init", "10.0.0.11", "--config", "sub"]) == exits.ERROR
    assert cli.main(["init", "10.0.0.11", "--config", "none/x.yml"]) == exits.ERROR
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "halo-cluster init: --config 'sub': is a folder: give a file's path",
        f"halo-cluster init: {Path.cwd() / 'none'} does not exist: make it first",
    ]
    assert sorted(os.listdir("sub")) == ["env.yml", "mine.yml"]


@pytest.mark.parametrize("argv", [["--bogus"], ["--yes", "--bogus=1"], ["-yz"], ["node1"]])
def test_a_deploy_option_pyinfra_does_not_take_is_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not pyinfra's usage, nor "no terminal" (issue 45 item 14): one line naming it, exit 2,
    before anything runs; pyinfra's own options (read from its command line) pass."""
    monkeypatch.setattr(sys, "stdin", io.StringIO())  # no terminal: it must not be the reason
    assert cli.main(["deploy", *argv]) == exits.USAGE
    lines = capsys.readouterr().err.splitlines()
    wrong = argv[-1]
    assert lines == [
        f"halo-cluster deploy: '{wrong}': unknown argument, or an option without its value "
        "(halo-cluster deploy --help)"
    ]
    assert deploy.unknown(["--parallel", "3", "--diff", "-vvy", "--limit", "node1"]) is None
    assert deploy.unknown(["--dry", "--limit"]) == "--limit"
