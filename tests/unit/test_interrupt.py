"""A Ctrl-C (issue 45 item 12): one line, `halo-cluster COMMAND: interrupted (Ctrl-C)`, exit 130
(commands/exits.py, docs/ci.md), never a traceback; the deploy's pyinfra answers it at its
question with exit 0, which must not read as converged; the image upgrade and the rollback
first say what they left on each node, from the run's own record of its steps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from halo_cluster.config import lock as locks
from halo_cluster.tools import cli
from halo_cluster.tools.commands import exits
from halo_cluster.tools.upgrading import image, machine
from tests.unit.configs import VALID_ROCE
from tests.unit.helpers_bench import fake_ssh
from tests.unit.helpers_down import config_text, key_folder, silent_nodes
from tests.unit.helpers_upgrade import D0, D1, REFERENCE, cluster_of


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with silent_nodes() as port:
        yield key_folder(tmp_path_factory.mktemp("silent"), config_text(port))


@pytest.mark.parametrize("argv", [["status"], ["drift", "--json-out", os.devnull], ["bench"]])
def test_a_ctrl_c_while_a_node_is_awaited_is_one_line(folder: Path, argv: list[str]) -> None:
    """The terminal's Ctrl-C reaches the whole foreground group (ssh and pyinfra too): here
    SIGINT to the command's own process group, while it waits on a node that never greets."""
    env = dict(os.environ, NO_COLOR="1")
    env.pop("CLUSTER_CONFIG", None)
    started = subprocess.Popen(
        [sys.executable, "-m", "halo_cluster.tools.cli", "--config", "cluster.yml", *argv],
        cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    time.sleep(3)  # python started, the connection under way (the bound is 10 s)
    os.killpg(started.pid, signal.SIGINT)
    out, err = started.communicate(timeout=60)
    assert "Traceback" not in out + err, err[-3000:]
    assert started.returncode == exits.INTERRUPTED, err[-3000:]
    assert err.splitlines()[-1] == f"halo-cluster {argv[0]}: interrupted (Ctrl-C)", err


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cluster.yml"
    path.write_text(VALID_ROCE)
    monkeypatch.setenv("CLUSTER_CONFIG", str(path))
    monkeypatch.delenv(locks.UPGRADING, raising=False)
    return path


def test_a_ctrl_c_at_the_deploys_question_is_not_a_converged_cluster(
    lab: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """pyinfra, given the Ctrl-C at its question, says `Exiting upon user request!` and exits
    0: stood in for by a run that gets the SIGINT and exits 0. The deploy waits for it, then
    exits 130 in one line, and image_update's upgrade does not run."""
    from halo_cluster.tools import reach
    from halo_cluster.tools.upgrading import imagemain

    lab.write_text(VALID_ROCE + "image_update: true\n")
    monkeypatch.setattr(reach, "probe_names", lambda *_: {})  # the nodes lead nowhere here

    def pyinfra(argv: list[str], **_) -> subprocess.CompletedProcess:
        os.kill(os.getpid(), signal.SIGINT)
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(subprocess, "run", pyinfra)
    monkeypatch.setattr(imagemain, "main_upgrade", lambda *_, **__: pytest.fail("upgraded"))
    monkeypatch.setattr(sys, "stdin", type("Tty", (), {"isatty": lambda self: True})())
    assert cli.main(["deploy"]) == exits.INTERRUPTED
    assert capsys.readouterr().err.splitlines() == ["halo-cluster deploy: interrupted (Ctrl-C)"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # given back


def test_an_interrupted_rollback_says_what_it_left_on_each_node(
    lab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Over the real transport to a fake ssh that answers every script (the history's append,
    the probe): halo1's pull recorded, then the Ctrl-C."""
    cluster = cluster_of(tmp_path)
    previous = locks.Build(D0, "", "", "", "")
    locks.write(
        Path(cluster.container.lock),
        locks.Lock(head="halo1", reference=REFERENCE, digest=D1, previous=previous),
    )
    fake_ssh(tmp_path, monkeypatch, "cat >/dev/null\nexit 0\n")

    def rollback(up: image.Upgrade) -> int:
        machine.record(up.runner, "pulled", node="halo1", digest=D0, seconds=12.5)
        raise KeyboardInterrupt

    monkeypatch.setattr(image.Upgrade, "rollback", rollback)
    assert cli.main(["rollback"]) == exits.INTERRUPTED
    assert capsys.readouterr().err.splitlines() == [
        "halo-cluster rollback: what this run left on each node, by the last step it recorded "
        "(the head's history holds every step):",
        f"  halo1: pulled (digest {D0}, seconds 12.5)",
        "  halo2: no step recorded by this run",
        "halo-cluster rollback: interrupted (Ctrl-C)",
    ]


def test_each_node_is_left_at_its_last_step_or_the_last_of_every_node() -> None:
    recorded = [
        locks.history_line("pulled", node="halo1", digest=D1, seconds=3.0),
        locks.history_line("pulled", node="halo2", digest=D1, seconds=4.0),
        locks.history_line("switched", reference=REFERENCE, to=D1, **{"from": D0}),
        locks.history_line("pruned", node="halo2", digests=["sha256:" + "e" * 64] * 3),
    ]
    lines = machine.left_on(["halo1", "halo2", "halo3"], recorded)
    assert lines[0] == f"  halo1: switched (reference {REFERENCE}, to {D1}, from {D0})"
    assert lines[1].startswith('  halo2: pruned (digests ["sha256:')
    assert len(lines[1]) < 110  # a long field is cut
    assert lines[2] == f"  halo3: switched (reference {REFERENCE}, to {D1}, from {D0})"
