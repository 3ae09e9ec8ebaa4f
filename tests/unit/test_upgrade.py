"""`halo-cluster upgrade` and `rollback`'s phases (halo_cluster/tools/upgrade.py) on a fake
runner: each failure's exit code and the lock it leaves (the real file), the history lines, the
prune selection, the crash-loop bound and the downtime; the SSH runner's parsers."""

from __future__ import annotations

import json
import shlex
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from halo_cluster.config import lock as locks
from halo_cluster.node.image import HeadHistory, moves_command
from halo_cluster.tools import cli, upgrade
from halo_cluster.tools.benchresults import GateResult, Side
from halo_cluster.tools.remote import completion_problem, parse_local_images
from halo_cluster.tools.upgrade import LocalImage, Upgrade
from tests.recorded import skopeo_digest

NAME = "docker.io/kyuz0/vllm-therock-gfx1151"
REFERENCE = f"{NAME}:latest"
D0 = skopeo_digest()
D1 = "sha256:" + "1" * 64
OLDER = "sha256:" + "9" * 64


@dataclass
class FakeRunner:
    """The cluster the phases reach, answering as told and recording what it was asked."""

    resolves_to: str = D1
    pull_errors: dict[str, str] = field(default_factory=dict)
    switch_errors: dict[str, str] = field(default_factory=dict)  # pinned: why its deploy failed
    completion_errors: dict[str, str] = field(default_factory=dict)  # pinned: its answer
    not_converged: str | None = None
    images: dict[str, list[LocalImage]] = field(default_factory=dict)
    nodes: tuple[str, ...] = ("node1", "node2")
    lines: list[dict] = field(default_factory=list)
    switched: list[str] = field(default_factory=list)
    stopped_first: list[bool] = field(default_factory=list)  # each switch's vLLM stop before
    pulled: list[str] = field(default_factory=list)
    removed: dict[str, list[str]] = field(default_factory=dict)
    # a gate without a bench by default: the bench's own tests are test_bench*.py
    left: Side = field(default_factory=lambda: Side("skipped", "bench.gate: false"))
    gated: GateResult = field(default_factory=lambda: GateResult("skipped"))
    benched: list[tuple[Side | None, str]] = field(default_factory=list)  # bench's arguments
    order: list[str] = field(default_factory=list)  # the benches and switches, in turn

    def converged(self) -> str | None:
        return self.not_converged

    def resolve(self, reference: str) -> tuple[str | None, str]:
        return self.resolves_to, ""

    def pull(self, image: str) -> dict[str, tuple[float, str]]:
        self.pulled.append(image)
        return {node: (1.5, self.pull_errors.get(node, "")) for node in self.nodes}

    def versions(self, image: str) -> tuple[str, str]:
        return "2.60.0", "0.33.0+lab1"

    def append(self, line: str) -> None:
        self.lines.append(json.loads(line))

    def switch(self, pinned: str, stop_first: bool = False) -> str | None:
        self.order.append("switch")
        self.switched.append(pinned)
        self.stopped_first.append(stop_first)
        return self.switch_errors.get(pinned)

    def running_other(self, pinned: str) -> dict[str, str]:
        return {}

    def completion(self) -> str | None:
        return self.completion_errors.get(self.switched[-1])

    def downtime(self) -> float | None:
        return 12.5

    def local_images(self, node: str) -> list[LocalImage] | str:
        return self.images.get(node, [])

    def remove_images(self, node: str, ids: list[str]) -> str:
        self.removed[node] = ids
        return ""

    def bench_left(self) -> Side:
        self.order.append("bench_left")
        return self.left

    def bench(self, left: Side | None, baseline: str) -> GateResult:
        self.order.append("bench")
        self.benched.append((left, baseline))
        return self.gated

    def states(self) -> dict[str, str]:
        return {"node1": "halo-ray active; halo-vllm activating", "node2": "halo-ray active"}

    def events(self) -> list[str]:
        return [line["event"] for line in self.lines]


def serving_lock(tmp_path: Path, head: str = "node1", **changes) -> Path:
    path = tmp_path / locks.LOCK_FILE
    lock = locks.Lock(head, REFERENCE, D0, "2026-12-01T10:00:00Z", "2.60.0", "0.33.0",
                      serving_since="2026-12-01T10:05:00Z")  # fmt: skip
    locks.write(path, replace(lock, **changes))
    return path


def machine(path: Path, runner: FakeRunner) -> tuple[Upgrade, list[str]]:
    said: list[str] = []
    return Upgrade(path, REFERENCE, runner, said.append), said


def lock_of(path: Path) -> locks.Lock:
    found, problems = locks.read(path)
    assert found is not None and not problems, problems
    return found


def test_the_same_digest_is_nothing_to_do(tmp_path: Path) -> None:
    path, runner = serving_lock(tmp_path), FakeRunner(resolves_to=D0)
    before = path.read_text()
    up, said = machine(path, runner)
    assert up.upgrade() == upgrade.OK
    assert said == [f"nothing to do: {REFERENCE} is {D0} (serving since 2026-12-01T10:05:00Z)"]
    assert path.read_text() == before and not runner.pulled and not runner.switched
    assert runner.lines[0]["event"] == "resolved" and runner.lines[0]["changed"] is False


def test_a_passed_upgrade_locks_the_new_digest_and_keeps_the_previous(tmp_path: Path) -> None:
    path, runner = serving_lock(tmp_path), FakeRunner()
    up, said = machine(path, runner)
    assert up.upgrade() == upgrade.OK
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
    runner = FakeRunner(pull_errors={"node2": "connection refused"})
    before = path.read_text()
    up, said = machine(path, runner)
    assert up.upgrade() == upgrade.ABORTED
    assert path.read_text() == before and not runner.switched
    failed = [line for line in runner.lines if line["event"] == "pull-failed"]
    assert [(f["node"], f["error"]) for f in failed] == [("node2", "connection refused")]
    assert f"node2: pull of {NAME}@{D1} failed: connection refused" in said


def test_a_failed_gate_rolls_back_and_rejects_the_build(tmp_path: Path) -> None:
    path = serving_lock(tmp_path)
    runner = FakeRunner(completion_errors={f"{NAME}@{D1}": "HTTP 500: engine dead"})
    up, said = machine(path, runner)
    assert up.upgrade() == upgrade.ROLLED_BACK
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
    runner = FakeRunner(switch_errors={f"{NAME}@{D1}": loop})
    up, _ = machine(path, runner)
    assert up.upgrade() == upgrade.ROLLED_BACK
    assert lock_of(path).rejected[0].reason == f"gate failed: {loop}"
    gate = runner.lines[runner.events().index("gate")]
    assert gate["checks"]["identity"] == "failed" and not gate["passed"]


def test_a_rollback_that_does_not_serve_exits_7_with_each_node(tmp_path: Path) -> None:
    path = serving_lock(tmp_path)
    runner = FakeRunner(switch_errors={f"{NAME}@{D1}": "deploy failed",
                                       f"{NAME}@{D0}": "deploy failed again"})  # fmt: skip
    up, said = machine(path, runner)
    assert up.upgrade() == upgrade.NOT_SERVING
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
    runner = FakeRunner(images={"node1": images, "node2": images[:2]})
    up, _ = machine(path, runner)
    assert up.upgrade() == upgrade.OK
    assert runner.removed == {"node1": ["c" * 64]}
    pruned = [line for line in runner.lines if line["event"] == "pruned"]
    assert [(p["node"], p["digests"]) for p in pruned] == [("node1", [OLDER])]


def test_no_image_is_pruned_when_the_gate_fails(tmp_path: Path) -> None:
    path = serving_lock(tmp_path)
    old = {"node1": [LocalImage("c", (OLDER,), False)]}
    runner = FakeRunner(completion_errors={f"{NAME}@{D1}": "empty"}, images=old)
    up, _ = machine(path, runner)
    assert up.upgrade() == upgrade.ROLLED_BACK and runner.removed == {}


def test_prune_selection_keeps_current_previous_and_used() -> None:
    images = [LocalImage("1", (D0, D1), False), LocalImage("2", (OLDER,), True),
              LocalImage("3", (OLDER,), False)]  # fmt: skip
    assert upgrade.prune_selection(images, {D1}) == ["3"]
    assert upgrade.prune_selection(images, {D1, OLDER}) == []


def test_a_rejected_digest_needs_retry(tmp_path: Path) -> None:
    rejected = (locks.Rejected(D1, "2026-12-01T11:00:00Z", "gate failed: completion: HTTP 500"),)
    path = serving_lock(tmp_path, rejected=rejected)
    runner = FakeRunner()
    up, said = machine(path, runner)
    assert up.upgrade() == upgrade.REFUSED and not runner.pulled
    assert said == [
        f"upgrade: {D1} was rejected at 2026-12-01T11:00:00Z (gate failed: completion: HTTP 500)"
        ": `halo-cluster upgrade --retry` tries it again"
    ]
    assert up.upgrade(retry=True) == upgrade.OK
    assert lock_of(path).rejected == ()


def test_a_cluster_not_converged_is_refused_before_anything(tmp_path: Path) -> None:
    path = serving_lock(tmp_path)
    runner = FakeRunner(not_converged="a dry run is not converged (drift exit 2): deploy first")
    up, said = machine(path, runner)
    assert up.upgrade() == upgrade.REFUSED and not runner.lines and not runner.pulled
    assert said[0].startswith("upgrade: the cluster is not as halo-cluster.lock says: a dry run")
    assert up.upgrade(converged=True) == upgrade.OK  # `deploy` with image_update just converged


def test_no_lock_is_refused(tmp_path: Path) -> None:
    up, said = machine(tmp_path / locks.LOCK_FILE, FakeRunner())
    assert up.upgrade() == upgrade.REFUSED and "no lock yet" in said[0]


def test_rollback_by_hand_swaps_current_and_previous(tmp_path: Path) -> None:
    path, runner = serving_lock(tmp_path), FakeRunner()
    up, _ = machine(path, runner)
    assert up.upgrade() == upgrade.OK
    assert up.rollback() == upgrade.OK
    lock = lock_of(path)
    assert lock.digest == D0 and lock.previous is not None and lock.previous.digest == D1
    assert lock.rejected == ()  # by hand: the build is not judged
    assert runner.pulled[-1] == f"{NAME}@{D0}" and runner.switched[-1] == f"{NAME}@{D0}"
    assert runner.stopped_first == [False, False]  # a serving build serves through the deploy
    assert runner.lines[-2]["event"] == "rolled-back" and runner.lines[-2]["by_hand"] is True


def test_rollback_without_a_previous_build_is_refused(tmp_path: Path) -> None:
    up, said = machine(serving_lock(tmp_path), FakeRunner())
    assert up.rollback() == upgrade.REFUSED and "no previous build" in said[0]


def test_rollback_whose_pull_fails_exits_5(tmp_path: Path) -> None:
    path = serving_lock(tmp_path, previous=locks.Build(OLDER))
    up, _ = machine(path, FakeRunner(pull_errors={"node1": "manifest unknown"}))
    assert up.rollback() == upgrade.ABORTED and lock_of(path).digest == D0


def test_an_interrupted_upgrade_is_gated_again(tmp_path: Path) -> None:
    path = serving_lock(tmp_path, digest=D1, trial=True, previous=locks.Build(D0))
    runner = FakeRunner()
    up, _ = machine(path, runner)
    assert up.upgrade() == upgrade.OK
    assert runner.switched == [f"{NAME}@{D1}"] and not runner.pulled
    assert not lock_of(path).trial


def test_the_crash_loop_bound() -> None:
    assert not upgrade.crash_looping([0, 1, 2])
    assert upgrade.crash_looping([0, 1, 3])
    assert upgrade.crash_looping([5, 0, 1, 2, 3])  # a start by hand resets the counter
    assert not upgrade.crash_looping([5, 0, 1, 2])


def test_downtime_is_the_time_without_a_200() -> None:
    samples = [(0.0, 200), (1.0, 200), (2.0, 0), (3.0, 503), (5.5, 200), (6.5, 200)]
    assert upgrade.downtime(samples) == 4.5
    assert upgrade.downtime([(0.0, 200), (1.0, 200)]) == 0.0
    assert upgrade.downtime([(0.0, 200), (1.0, 0)]) is None


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


def test_the_completion_is_judged_by_status_text_and_model() -> None:
    good = json.dumps({"model": "m", "choices": [{"text": " Paris"}]})
    assert completion_problem(0, f"{good}\n200", "", "m") is None
    assert completion_problem(0, '{"error": "x"}\n500', "", "m") == 'HTTP 500: {"error": "x"}'
    empty = json.dumps({"model": "m", "choices": [{"text": " "}]})
    assert completion_problem(0, f"{empty}\n200", "", "m") == "an empty completion"
    assert completion_problem(0, f"{good}\n200", "", "other") == "answered by 'm', not other"
    assert completion_problem(7, "", "curl: (7) refused\n", "m") == "no answer (curl: (7) refused)"


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
    from halo_cluster.tools.status import image_line

    path, runner = serving_lock(tmp_path), FakeRunner()
    assert machine(path, runner)[0].upgrade() == upgrade.OK
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
    path, runner = serving_lock(tmp_path), FakeRunner(left=OLD_RUNS, gated=PASSED)
    up, said = machine(path, runner)
    assert up.upgrade() == upgrade.OK
    assert runner.order == ["bench_left", "switch", "bench"]  # the rollback's switch: no bench
    assert runner.benched == [(OLD_RUNS, D0)]
    assert PASSED.said[0] in said
    gate = runner.lines[runner.events().index("gate")]
    assert gate["checks"]["bench"] == "passed" and gate["passed"]


def test_a_slower_build_fails_the_gate_and_no_bench_benches_nothing(tmp_path: Path) -> None:
    slower = GateResult("failed", "concurrency 8: output tokens/s 349 (new ...): fail")
    path, runner = serving_lock(tmp_path), FakeRunner(left=OLD_RUNS, gated=slower)
    assert machine(path, runner)[0].upgrade() == upgrade.ROLLED_BACK
    assert runner.order == ["bench_left", "switch", "bench", "switch"]
    reason = f"gate failed: bench: {slower.reason}"
    assert lock_of(path).rejected[0].reason == reason
    (tmp_path / "again").mkdir()
    path, runner = serving_lock(tmp_path / "again"), FakeRunner(left=OLD_RUNS, gated=slower)
    assert machine(path, runner)[0].upgrade(no_bench=True) == upgrade.OK
    assert runner.order == ["switch"] and not runner.benched


def test_a_build_left_that_cannot_be_benched_aborts_with_nothing_restarted(
    tmp_path: Path,
) -> None:
    path = serving_lock(tmp_path)
    runner = FakeRunner(left=Side("failed", "ssh gave no answer in 60 s"))
    before = path.read_text()
    up, said = machine(path, runner)
    assert up.upgrade() == upgrade.ABORTED
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
    runner = FakeRunner(gated=PASSED)
    assert machine(path, runner)[0].upgrade() == upgrade.OK
    assert runner.order == ["switch", "bench"] and runner.benched == [(None, D0)]


def test_an_automatic_rollback_keeps_the_way_back(tmp_path: Path) -> None:
    """The lock after a failed gate is the lock before the upgrade, plus the rejected build: its
    `previous` stays, so `halo-cluster rollback` and `status` still know the build before."""
    older = locks.Build(OLDER, "2026-11-01T10:00:00Z", "2026-11-01T10:05:00Z", "2.59.0", "0.32.0")
    path = serving_lock(tmp_path, previous=older)
    runner = FakeRunner(completion_errors={f"{NAME}@{D1}": "HTTP 500: engine dead"})
    up, _ = machine(path, runner)
    assert up.upgrade() == upgrade.ROLLED_BACK
    lock = lock_of(path)
    assert (lock.digest, lock.resolved, lock.vllm) == (D0, "2026-12-01T10:00:00Z", "0.33.0")
    assert lock.previous == older and [r.digest for r in lock.rejected] == [D1]
    runner.completion_errors.clear()
    assert machine(path, runner)[0].rollback() == upgrade.OK  # the way back is still there
    assert lock_of(path).digest == OLDER


@dataclass
class SlowRunner(FakeRunner):
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
    runner = SlowRunner(completion_errors={f"{NAME}@{D1}": "HTTP 500: engine dead"})
    said: list[str] = []
    up = Upgrade(path, REFERENCE, runner, said.append, clock=lambda: runner.now[0])
    assert up.upgrade() == upgrade.ROLLED_BACK
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
    runner = FakeRunner(completion_errors={f"{fork}@{D1}": "HTTP 500: engine dead"})
    up = Upgrade(path, f"{fork}:latest", runner, [].append)
    assert up.upgrade() == upgrade.ROLLED_BACK
    assert runner.switched == [f"{fork}@{D1}", f"{NAME}@{D0}"]
    assert (lock_of(path).reference, lock_of(path).digest) == (REFERENCE, D0)
