"""The image upgrade's parts without its phases: the crash-loop bound, the downtime, the lock in
trial and its builds, the head's history as the deploy reads it, the completion's judgement, the
local images' parse (halo_cluster/tools/upgrading/), `status`'s image line, and the commands'
refusal of a node left out by --limit/--exclude, before any node is reached."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from halo_cluster.config import lock as locks
from halo_cluster.node.image import HeadHistory, moves_command
from halo_cluster.tools import cli, transport
from halo_cluster.tools.upgrading import imagegate, imagemain
from halo_cluster.tools.upgrading.imagegate import LocalImage
from halo_cluster.tools.upgrading.imagenodes import parse_local_images
from halo_cluster.tools.upgrading.machine import REFUSED, completion_problem
from tests.unit.configs import VALID_ROCE
from tests.unit.helpers_upgrade import (
    D0,
    D1,
    NAME,
    OLDER,
    REFERENCE,
    cluster_of,
    lock_of,
    serving_lock,
)


def test_the_crash_loop_bound() -> None:
    assert not imagegate.crash_looping([0, 1, 2])
    assert imagegate.crash_looping([0, 1, 3])
    assert imagegate.crash_looping([5, 0, 1, 2, 3])  # a start by hand resets the counter
    assert not imagegate.crash_looping([5, 0, 1, 2])


def test_downtime_is_the_time_without_a_200() -> None:
    samples = [(0.0, 200), (1.0, 200), (2.0, 0), (3.0, 503), (5.5, 200), (6.5, 200)]
    assert imagegate.downtime(samples) == 4.5
    assert imagegate.downtime([(0.0, 200), (1.0, 200)]) == 0.0
    assert imagegate.downtime([(0.0, 200), (1.0, 0)]) is None


def test_the_lock_in_trial_is_refused_outside_the_upgrade(tmp_path: Path, monkeypatch) -> None:
    from tests.unit.helpers_lock import CONFIG, problems

    serving_lock(tmp_path, "halo1", digest=D1, trial=True, previous=locks.Build(D0))
    monkeypatch.delenv(locks.UPGRADING, raising=False)
    path = tmp_path.resolve() / locks.LOCK_FILE
    assert problems(tmp_path, f"image: {REFERENCE}\n") == [
        f"{path}: the upgrade to {D1} was not gated (interrupted): `halo-cluster upgrade` gates "
        f"it, `halo-cluster rollback` returns to {D0}"
    ]
    monkeypatch.setenv(locks.UPGRADING, "1")
    assert CONFIG  # the same config loads for the upgrade's own deploy
    from tests.unit.helpers_lock import load

    assert load(tmp_path, f"image: {REFERENCE}\n").container.digest == D1


def test_the_head_runs_what_the_last_switch_says() -> None:
    lines = [
        locks.history_line("resolved", reference=REFERENCE, digest=D0, changed=True),
        locks.history_line(
            "resolved", reference=REFERENCE, digest=D1, changed=True, candidate=True
        ),
    ]
    assert HeadHistory().process(lines).digest == D0  # a candidate is not what runs
    lines.append(locks.history_line("switched", reference=REFERENCE, to=D1, **{"from": D0}))
    assert HeadHistory().process(lines).digest == D1


def test_the_lock_keeps_previous_and_rejected(tmp_path: Path) -> None:
    rejected = (locks.Rejected(OLDER, "2026-12-01T11:00:00Z", "gate failed: x"),)
    previous = locks.Build(D1, "2026-11-01T10:00:00Z", "2026-11-01T10:05:00Z", "2.60.0")
    path = serving_lock(tmp_path, previous=previous, rejected=rejected)
    lock = lock_of(path)
    assert lock.previous == previous and lock.rejected == rejected
    doc = json.loads(path.read_text())
    assert doc["image"]["previous"]["digest"] == D1
    doc["image"]["previous"]["digest"] = "latest"
    path.write_text(json.dumps(doc))
    assert locks.read(path)[1] == [
        f"{path}: image.previous.digest: 'latest' has a digest of an unknown algorithm (known: "
        "sha256, sha512)"
    ]


def test_the_completion_is_judged_by_status_text_and_model(tmp_path: Path) -> None:
    head = cluster_of(tmp_path).head

    def judged(code: int, out: str, err: str = "", model: str = "m") -> str | None:
        return completion_problem(transport.Result(head, code, out, err), model)

    good = json.dumps({"model": "m", "choices": [{"text": " Paris"}]})
    assert judged(0, f"{good}\n200") is None
    assert judged(0, '{"error": "x"}\n500') == 'HTTP 500: {"error": "x"}'
    empty = json.dumps({"model": "m", "choices": [{"text": " "}]})
    assert judged(0, f"{empty}\n200") == "an empty completion"
    assert judged(0, f"{good}\n200", model="other") == "answered by 'm', not other"
    assert judged(7, "", "curl: (7) refused\n") == "no answer (curl: (7) refused)"


def test_local_images_are_those_of_the_cluster_name() -> None:
    images = [
        f"{'a' * 64} {NAME}@{D0} {NAME}@{D1}",
        f"{'b' * 64} docker.io/library/fedora@{OLDER}",
        f"{'c' * 64} {NAME}@{OLDER}",
    ]
    assert parse_local_images(images, ["a" * 64], NAME) == [
        LocalImage("a" * 64, (D0, D1), True),
        LocalImage("c" * 64, (OLDER,), False),
    ]


@pytest.mark.parametrize("command", ["upgrade", "rollback"])
def test_the_commands_exist_with_their_help(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main([command, "--help"]) == 0
    assert capsys.readouterr().out.startswith(f"usage: halo-cluster {command}")


def test_the_last_move_is_found_behind_300_later_lines(tmp_path: Path) -> None:
    """The head's history read by its real command: a deploy's resolve, then 300 no-op
    upgrades' candidate resolves and bench lines; the head still runs the resolved digest."""
    history = tmp_path / "history.jsonl"
    lines = [locks.history_line("resolved", reference=REFERENCE, digest=D0, changed=True)]
    for i in range(150):
        lines.append(locks.history_line("resolved", reference=REFERENCE, digest=D1,
                                        changed=True, candidate=True))  # fmt: skip
        lines.append(locks.history_line("bench", digest=D0, run_id=str(i)))
    history.write_text("\n".join(lines) + "\n")
    command = moves_command(shlex.quote(str(history)))
    output = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
    assert HeadHistory().process(output.stdout.splitlines()).digest == D0
    switched = locks.history_line("switched", reference=REFERENCE, to=D1, **{"from": D0})
    history.write_text("\n".join([*lines, switched, *lines[1:]]) + "\n")
    output = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
    assert HeadHistory().process(output.stdout.splitlines()).digest == D1
    missing = moves_command(shlex.quote(str(tmp_path / "none.jsonl")))
    assert subprocess.run(["sh", "-c", missing], capture_output=True, text=True).stdout == ""


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("upgrade", ["--exclude", "halo2"]),
        ("upgrade", ["--limit", "halo1"]),
        ("rollback", ["--exclude", "halo1"]),
    ],
)
def test_a_node_left_out_is_refused_in_one_line_before_any_node_is_reached(
    tmp_path: Path, monkeypatch, capsys, command: str, argv: list[str]
) -> None:
    """Every rank must run one image: the image upgrade and the rollback move every node."""
    path = tmp_path / "cluster.yml"
    path.write_text(VALID_ROCE)
    monkeypatch.setenv("CLUSTER_CONFIG", str(path))
    monkeypatch.setenv(locks.UPGRADING, "1")  # restored after: the command sets it
    monkeypatch.setattr(transport, "connected", None)  # reaching a node would fail here
    main = imagemain.main_upgrade if command == "upgrade" else imagemain.main_rollback
    assert main(argv) == REFUSED
    out, err = capsys.readouterr()
    left = "halo2" if "halo2" in argv or "--limit" in argv else "halo1"
    assert (out, err) == (
        "",
        f"halo-cluster {command}: {left} left out by --limit/--exclude: the image moves every "
        "node at once (every rank of the model must run one image); run it without them\n",
    )


def test_an_unknown_node_is_refused_and_every_node_named_is_no_refusal(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    path = tmp_path / "cluster.yml"
    path.write_text(VALID_ROCE)
    monkeypatch.setenv("CLUSTER_CONFIG", str(path))
    monkeypatch.setenv(locks.UPGRADING, "1")
    monkeypatch.setattr(transport, "connected", None)
    assert imagemain.main_upgrade(["--limit", "halo3"]) == REFUSED
    assert capsys.readouterr().err == (
        "halo-cluster upgrade: --limit 'halo3': no such node in cluster.yml (its nodes: halo1, "
        "halo2)\n"
    )
    cluster = cluster_of(tmp_path)
    args = imagemain._parser("upgrade", "").parse_args(["--limit", "halo1", "--limit", "halo2"])
    assert imagemain.whole(args, cluster) is None


@pytest.mark.parametrize(
    ("command", "previous", "said"),
    [
        ("rollback", None, "records no previous build to go back to"),
        ("rollback", False, "records no previous build to go back to"),
        ("upgrade", None, "no lock yet: a first deploy resolves the image"),
    ],
)
def test_the_lock_is_read_before_any_node_is_reached(
    tmp_path: Path, monkeypatch, capsys, command: str, previous: bool | None, said: str
) -> None:
    """Issue 45 item 15: the local inputs first (the config, the lock, the options), in one
    line, then the nodes: a rollback without a previous build reached them before saying so."""
    path = tmp_path / "cluster.yml"
    path.write_text(VALID_ROCE)
    monkeypatch.setenv("CLUSTER_CONFIG", str(path))
    monkeypatch.setenv(locks.UPGRADING, "1")
    monkeypatch.setattr(transport, "connected", None)  # reaching a node would fail here
    cluster = cluster_of(tmp_path)
    lock = Path(cluster.container.lock)
    if previous is not None:  # a lock with no previous build: the first deploy's
        locks.write(lock, locks.Lock(head="halo1", reference=REFERENCE, digest=D0))
    main = imagemain.main_upgrade if command == "upgrade" else imagemain.main_rollback
    assert main(["--no-bench"] if command == "upgrade" else []) == REFUSED
    colon = ":" if command == "upgrade" else ""
    assert capsys.readouterr() == ("", f"halo-cluster {command}: {lock}{colon} {said}\n")
