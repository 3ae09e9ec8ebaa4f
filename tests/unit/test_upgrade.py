"""`halo-cluster upgrade` and `rollback`'s phases (halo_cluster/tools/upgrading/image.py,
rollback.py) on the fake cluster (tests/unit/helpers_upgrade.py): each failure's exit code and
the lock it leaves (the real file), the history lines, the prune selection, the crash-loop bound
and the downtime; the real reach's parsers; a node left out by --limit/--exclude refused."""

from __future__ import annotations

import json
import shlex
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from halo_cluster.config import lock as locks
from halo_cluster.node.image import HeadHistory, moves_command
from halo_cluster.tools import cli, project, transport
from halo_cluster.tools.benchresults import GateResult, Side
from halo_cluster.tools.upgrading import imagegate, imagemain
from halo_cluster.tools.upgrading.image import Upgrade
from halo_cluster.tools.upgrading.imagegate import LocalImage
from halo_cluster.tools.upgrading.imagenodes import parse_local_images
from halo_cluster.tools.upgrading.machine import (
    ABORTED,
    NOT_SERVING,
    OK,
    REFUSED,
    ROLLED_BACK,
    completion_problem,
)
from tests.unit.configs import VALID_ROCE
from tests.unit.helpers_upgrade import D0, D1, NAME, OLDER, REFERENCE, FakeCluster


def cluster_of(tmp_path: Path):
    path = tmp_path / "cluster.yml"
    path.write_text(VALID_ROCE)
    return project.load(path)


def serving_lock(tmp_path: Path, head: str = "node1", **changes) -> Path:
    path = tmp_path / locks.LOCK_FILE
    lock = locks.Lock(head, REFERENCE, D0, "2026-12-01T10:00:00Z", "2.60.0", "0.33.0",
                      serving_since="2026-12-01T10:05:00Z")  # fmt: skip
    locks.write(path, replace(lock, **changes))
    return path


def machine(path: Path, runner: FakeCluster) -> tuple[Upgrade, list[str]]:
    said: list[str] = []
    return Upgrade(path, REFERENCE, runner, said.append), said


def lock_of(path: Path) -> locks.Lock:
    found, problems = locks.read(path)
    assert found is not None and not problems, problems
    return found


def test_the_same_digest_is_nothing_to_do(tmp_path: Path) -> None:
    path, runner = serving_lock(tmp_path), FakeCluster(resolves_to=D0)
    before = path.read_text()
    up, said = machine(path, runner)
    assert up.upgrade() == OK
    assert said == [f"nothing to do: {REFERENCE} is {D0} (serving since 2026-12-01T10:05:00Z)"]
    assert path.read_text() == before and not runner.pulled and not runner.switched
    assert runner.lines[0]["event"] == "resolved" and runner.lines[0]["changed"] is False


def test_a_passed_upgrade_locks_the_new_digest_and_keeps_the_previous(tmp_path: Path) -> None:
    path, runner = serving_lock(tmp_path), FakeCluster()
    up, said = machine(path, runner)
    assert up.upgrade() == OK
    lock = lock_of(path)
    assert (lock.digest, lock.trial, lock.vllm) == (D1, False, "0.33.0+lab1")
    assert lock.serving_since and lock.previous is not None and lock.previous.digest == D0
    assert runner.pulled == [f"{NAME}@{D1}"] and runner.switched == [f"{NAME}@{D1}"]
    assert runner.events() == ["resolved", "pulled", "pulled", "switched", "gate", "serving"]
    gate = runner.lines[4]
    assert gate["passed"] and gate["downtime_s"] == 12.5
    assert gate["checks"] == {"identity": "passed", "completion": "passed", "bench": "skipped"}
    assert "downtime: 12.5 s without a 200 from /health" in said


def test_a_failed_pull_aborts_with_nothing_restarted(tmp_path: Path) -> None:
    path = serving_lock(tmp_path)
    runner = FakeCluster(pull_errors={"node2": "connection refused"})
    before = path.read_text()
    up, said = machine(path, runner)
    assert up.upgrade() == ABORTED
    assert path.read_text() == before and not runner.switched
    failed = [line for line in runner.lines if line["event"] == "pull-failed"]
    assert [(f["node"], f["error"]) for f in failed] == [("node2", "connection refused")]
    assert f"node2: pull of {NAME}@{D1} failed: connection refused" in said


def test_a_failed_gate_rolls_back_and_rejects_the_build(tmp_path: Path) -> None:
    path = serving_lock(tmp_path)
    runner = FakeCluster(completion_errors={f"{NAME}@{D1}": "HTTP 500: engine dead"})
    up, said = machine(path, runner)
    assert up.upgrade() == ROLLED_BACK
    lock = lock_of(path)
    assert (lock.digest, lock.trial, lock.ray) == (D0, False, "2.60.0") and lock.serving_since
    assert [r.digest for r in lock.rejected] == [D1]
    assert lock.rejected[0].reason == "gate failed: completion: HTTP 500: engine dead"
    assert runner.switched == [f"{NAME}@{D1}", f"{NAME}@{D0}"]
    assert runner.stopped_first == [False, True]  # the failed build stopped before the deploy
    assert runner.events()[-4:] == ["gate", "switched", "rolled-back", "serving"]
    back = runner.lines[-2]
    assert (back["from"], back["to"], back["by_hand"]) == (D1, D0, False)
    assert said[-1].startswith(f"gate failed: completion: HTTP 500: engine dead; rolled back "
                               f"from {D1} to {D0} (serving again after")  # fmt: skip


def test_a_crash_looping_switch_rolls_back(tmp_path: Path) -> None:
    path = serving_lock(tmp_path)
    loop = "vLLM restarted 3 times after the switch"
    runner = FakeCluster(switch_errors={f"{NAME}@{D1}": loop})
    up, _ = machine(path, runner)
    assert up.upgrade() == ROLLED_BACK
    assert lock_of(path).rejected[0].reason == f"gate failed: {loop}"
    gate = runner.lines[runner.events().index("gate")]
    assert gate["checks"]["identity"] == "failed" and not gate["passed"]


def test_a_rollback_that_does_not_serve_exits_7_with_each_node(tmp_path: Path) -> None:
    path = serving_lock(tmp_path)
    runner = FakeCluster(switch_errors={f"{NAME}@{D1}": "deploy failed",
                                       f"{NAME}@{D0}": "deploy failed again"})  # fmt: skip
    up, said = machine(path, runner)
    assert up.upgrade() == NOT_SERVING
    failed = runner.lines[-1]
    assert failed["event"] == "rollback-failed" and failed["digest"] == D0
    assert failed["nodes"]["node1"] == "halo-ray active; halo-vllm activating"
    assert "  node2: halo-ray active" in said
    assert lock_of(path).digest == D0  # the lock names the build the units are on


def test_the_previous_image_is_never_pruned_and_a_used_one_neither(tmp_path: Path) -> None:
    path = serving_lock(tmp_path)
    images = [
        LocalImage("a" * 64, (D0,), used=False),
        LocalImage("b" * 64, (D1,), used=True),
        LocalImage("c" * 64, (OLDER,), used=False),
        LocalImage("d" * 64, ("sha256:" + "8" * 64,), used=True),  # a container of it remains
    ]
    runner = FakeCluster(images={"node1": images, "node2": images[:2]})
    up, _ = machine(path, runner)
    assert up.upgrade() == OK
    assert runner.removed == {"node1": ["c" * 64]}
    pruned = [line for line in runner.lines if line["event"] == "pruned"]
    assert [(p["node"], p["digests"]) for p in pruned] == [("node1", [OLDER])]


def test_no_image_is_pruned_when_the_gate_fails(tmp_path: Path) -> None:
    path = serving_lock(tmp_path)
    old = {"node1": [LocalImage("c", (OLDER,), False)]}
    runner = FakeCluster(completion_errors={f"{NAME}@{D1}": "empty"}, images=old)
    up, _ = machine(path, runner)
    assert up.upgrade() == ROLLED_BACK and runner.removed == {}


def test_prune_selection_keeps_current_previous_and_used() -> None:
    images = [LocalImage("1", (D0, D1), False), LocalImage("2", (OLDER,), True),
              LocalImage("3", (OLDER,), False)]  # fmt: skip
    assert imagegate.prune_selection(images, {D1}) == ["3"]
    assert imagegate.prune_selection(images, {D1, OLDER}) == []


def test_a_rejected_digest_needs_retry(tmp_path: Path) -> None:
    rejected = (locks.Rejected(D1, "2026-12-01T11:00:00Z", "gate failed: completion: HTTP 500"),)
    path = serving_lock(tmp_path, rejected=rejected)
    runner = FakeCluster()
    up, said = machine(path, runner)
    assert up.upgrade() == REFUSED and not runner.pulled
    assert said == [
        f"upgrade: {D1} was rejected at 2026-12-01T11:00:00Z (gate failed: completion: HTTP 500)"
        ": `halo-cluster upgrade --retry` tries it again"
    ]
    assert up.upgrade(retry=True) == OK
    assert lock_of(path).rejected == ()


def test_a_cluster_not_converged_is_refused_before_anything(tmp_path: Path) -> None:
    path = serving_lock(tmp_path)
    runner = FakeCluster(not_converged="a dry run is not converged (drift exit 2): deploy first")
    up, said = machine(path, runner)
    assert up.upgrade() == REFUSED and not runner.lines and not runner.pulled
    assert said[0].startswith("upgrade: the cluster is not as halo-cluster.lock says: a dry run")
    assert up.upgrade(converged=True) == OK  # `deploy` with image_update just converged


def test_no_lock_is_refused(tmp_path: Path) -> None:
    up, said = machine(tmp_path / locks.LOCK_FILE, FakeCluster())
    assert up.upgrade() == REFUSED and "no lock yet" in said[0]


def test_rollback_by_hand_swaps_current_and_previous(tmp_path: Path) -> None:
    path, runner = serving_lock(tmp_path), FakeCluster()
    up, _ = machine(path, runner)
    assert up.upgrade() == OK
    assert up.rollback() == OK
    lock = lock_of(path)
    assert lock.digest == D0 and lock.previous is not None and lock.previous.digest == D1
    assert lock.rejected == ()  # by hand: the build is not judged
    assert runner.pulled[-1] == f"{NAME}@{D0}" and runner.switched[-1] == f"{NAME}@{D0}"
    assert runner.stopped_first == [False, False]  # a serving build serves through the deploy
    assert runner.lines[-2]["event"] == "rolled-back" and runner.lines[-2]["by_hand"] is True


def test_rollback_without_a_previous_build_is_refused(tmp_path: Path) -> None:
    up, said = machine(serving_lock(tmp_path), FakeCluster())
    assert up.rollback() == REFUSED and "no previous build" in said[0]


def test_rollback_whose_pull_fails_exits_5(tmp_path: Path) -> None:
    path = serving_lock(tmp_path, previous=locks.Build(OLDER))
    up, _ = machine(path, FakeCluster(pull_errors={"node1": "manifest unknown"}))
    assert up.rollback() == ABORTED and lock_of(path).digest == D0


def test_an_interrupted_upgrade_is_gated_again(tmp_path: Path) -> None:
    path = serving_lock(tmp_path, digest=D1, trial=True, previous=locks.Build(D0))
    runner = FakeCluster()
    up, _ = machine(path, runner)
    assert up.upgrade() == OK
    assert runner.switched == [f"{NAME}@{D1}"] and not runner.pulled
    assert not lock_of(path).trial


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
    lines = [
        f"{'a' * 64} {NAME}@{D0} {NAME}@{D1}",
        f"{'b' * 64} docker.io/library/fedora@{OLDER}",
        f"{'c' * 64} {NAME}@{OLDER}",
        "@@used",
        "a" * 64,
    ]
    assert parse_local_images(lines, NAME) == [
        LocalImage("a" * 64, (D0, D1), True),
        LocalImage("c" * 64, (OLDER,), False),
    ]


@pytest.mark.parametrize("command", ["upgrade", "rollback"])
def test_the_commands_exist_with_their_help(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main([command, "--help"]) == 0
    assert capsys.readouterr().out.startswith(f"usage: halo-cluster {command}")


def test_status_shows_current_and_previous_with_their_serving_times(tmp_path: Path) -> None:
    from halo_cluster.tools.statusview import image_line

    path, runner = serving_lock(tmp_path), FakeCluster()
    assert machine(path, runner)[0].upgrade() == OK
    lock = lock_of(path)
    current, previous = image_line(lock).splitlines()
    assert current.startswith(f"image: {REFERENCE} is {D1} (resolved ")
    assert current.endswith(f", serving since {lock.serving_since})")
    assert previous == f"previous: {D0} (served since 2026-12-01T10:05:00Z)"


OLD_RUNS = Side("measured", lines=({"levels": {}},) * 3)
PASSED = GateResult("passed", "", ("bench gate: concurrency 8: output tokens/s 3,410 (new, ...",))


def test_the_build_left_is_benched_before_the_switch_and_the_new_one_after(
    tmp_path: Path,
) -> None:
    path, runner = serving_lock(tmp_path), FakeCluster(left=OLD_RUNS, gated=PASSED)
    up, said = machine(path, runner)
    assert up.upgrade() == OK
    assert runner.order == ["bench_left", "switch", "bench"]  # the rollback's switch: no bench
    assert runner.benched == [(OLD_RUNS, D0)]
    assert PASSED.said[0] in said
    gate = runner.lines[runner.events().index("gate")]
    assert gate["checks"]["bench"] == "passed" and gate["passed"]


def test_a_slower_build_fails_the_gate_and_no_bench_benches_nothing(tmp_path: Path) -> None:
    slower = GateResult("failed", "concurrency 8: output tokens/s 349 (new ...): fail")
    path, runner = serving_lock(tmp_path), FakeCluster(left=OLD_RUNS, gated=slower)
    assert machine(path, runner)[0].upgrade() == ROLLED_BACK
    assert runner.order == ["bench_left", "switch", "bench", "switch"]
    reason = f"gate failed: bench: {slower.reason}"
    assert lock_of(path).rejected[0].reason == reason
    (tmp_path / "again").mkdir()
    path, runner = serving_lock(tmp_path / "again"), FakeCluster(left=OLD_RUNS, gated=slower)
    assert machine(path, runner)[0].upgrade(no_bench=True) == OK
    assert runner.order == ["switch"] and not runner.benched


def test_a_build_left_that_cannot_be_benched_aborts_with_nothing_restarted(
    tmp_path: Path,
) -> None:
    path = serving_lock(tmp_path)
    runner = FakeCluster(left=Side("failed", "ssh gave no answer in 60 s"))
    before = path.read_text()
    up, said = machine(path, runner)
    assert up.upgrade() == ABORTED
    assert path.read_text() == before and not runner.switched and not runner.benched
    assert said[-1] == (
        "upgrade aborted: the bench of the build being left failed (ssh gave no answer in "
        "60 s); nothing was restarted (`--no-bench` skips the bench gate this once)"
    )


def test_an_interrupted_upgrade_is_gated_against_the_kept_runs_of_the_build_left(
    tmp_path: Path,
) -> None:
    """Its build being left no longer serves: nothing to bench before the gate; the runs the
    interrupted upgrade kept stand in (benchgate.gate with no `left`)."""
    previous = locks.Build(D0, "2026-12-01T10:00:00Z", "2026-12-01T10:05:00Z", "2.60.0", "0.33.0")
    path = serving_lock(tmp_path, digest=D1, trial=True, previous=previous)
    runner = FakeCluster(gated=PASSED)
    assert machine(path, runner)[0].upgrade() == OK
    assert runner.order == ["switch", "bench"] and runner.benched == [(None, D0)]


def test_an_automatic_rollback_keeps_the_way_back(tmp_path: Path) -> None:
    """The lock after a failed gate is the lock before the upgrade, plus the rejected build: its
    `previous` stays, so `halo-cluster rollback` and `status` still know the build before."""
    older = locks.Build(OLDER, "2026-11-01T10:00:00Z", "2026-11-01T10:05:00Z", "2.59.0", "0.32.0")
    path = serving_lock(tmp_path, previous=older)
    runner = FakeCluster(completion_errors={f"{NAME}@{D1}": "HTTP 500: engine dead"})
    up, _ = machine(path, runner)
    assert up.upgrade() == ROLLED_BACK
    lock = lock_of(path)
    assert (lock.digest, lock.resolved, lock.vllm) == (D0, "2026-12-01T10:00:00Z", "0.33.0")
    assert lock.previous == older and [r.digest for r in lock.rejected] == [D1]
    runner.completion_errors.clear()
    assert machine(path, runner)[0].rollback() == OK  # the way back is still there
    assert lock_of(path).digest == OLDER


@dataclass
class SlowCluster(FakeCluster):
    """A cluster whose pull takes 100 s and each switch 10 s, on the upgrade's clock."""

    now: list[float] = field(default_factory=lambda: [0.0])

    def pull(self, image: str) -> dict[str, tuple[float, str]]:
        self.now[0] += 100
        return super().pull(image)

    def switch(self, pinned: str, stop_first: bool = False) -> str | None:
        self.now[0] += 10
        return super().switch(pinned, stop_first)


def test_serving_again_counts_from_the_rollbacks_switch(tmp_path: Path) -> None:
    path = serving_lock(tmp_path)
    runner = SlowCluster(completion_errors={f"{NAME}@{D1}": "HTTP 500: engine dead"})
    said: list[str] = []
    up = Upgrade(path, REFERENCE, runner, said.append, clock=lambda: runner.now[0])
    assert up.upgrade() == ROLLED_BACK
    assert said[-1].endswith(f"from {D1} to {D0} (serving again after 10.0 s)")  # not 120 s
    assert runner.lines[runner.events().index("rolled-back")]["seconds"] == 10.0


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


def test_a_rollback_from_another_repository_name_returns_to_the_old_name(tmp_path: Path) -> None:
    """`image` moved to another name and its build failed the gate: the nodes go back to what
    they ran, the old name at D0 (the new name at D0 may not exist), and the lock says so."""
    fork = "docker.io/someone/vllm-fork"
    path = serving_lock(tmp_path)
    runner = FakeCluster(completion_errors={f"{fork}@{D1}": "HTTP 500: engine dead"})
    up = Upgrade(path, f"{fork}:latest", runner, [].append)
    assert up.upgrade() == ROLLED_BACK
    assert runner.switched == [f"{fork}@{D1}", f"{NAME}@{D0}"]
    assert (lock_of(path).reference, lock_of(path).digest) == (REFERENCE, D0)


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
