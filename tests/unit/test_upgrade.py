"""`halo-cluster upgrade` and `rollback`'s phases (halo_cluster/tools/upgrading/image.py,
rollback.py) on the fake cluster (tests/unit/helpers_upgrade.py): each failure's exit code and
the lock it leaves (the real file), the history lines, the prune, the bench gate's order; the
parts without the phases: test_upgrade_parts.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from halo_cluster.config import lock as locks
from halo_cluster.tools.bench.results import GateResult, Side
from halo_cluster.tools.upgrading import imagegate
from halo_cluster.tools.upgrading.image import Upgrade
from halo_cluster.tools.upgrading.imagegate import LocalImage
from halo_cluster.tools.upgrading.machine import (
    ABORTED,
    NOT_SERVING,
    OK,
    REFUSED,
    ROLLED_BACK,
)
from tests.unit.helpers_upgrade import (
    D0,
    D1,
    NAME,
    OLDER,
    REFERENCE,
    FakeCluster,
    lock_of,
    serving_lock,
)


def machine(path: Path, runner: FakeCluster) -> tuple[Upgrade, list[str]]:
    said: list[str] = []
    return Upgrade(path, REFERENCE, runner, said.append), said


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


def test_status_shows_current_and_previous_with_their_serving_times(tmp_path: Path) -> None:
    from halo_cluster.tools.status.view import image_line

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
    interrupted upgrade kept stand in (bench/gate.py's `gate` with no `left`)."""
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
