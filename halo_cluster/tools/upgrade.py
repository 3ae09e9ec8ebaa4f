"""`halo-cluster upgrade` and `halo-cluster rollback`: the cluster moved to another build of its
image as one, and back (docs/roles/container.md, docs/design/day-after.md section 4).

    P0 identity: the lock, a converged cluster, the head's resolve of the image (equal: exit 0)
    P1 pull the new digest on every node at once while the old build serves (a failure: exit 5),
       then the old build benched for the gate (a run that cannot measure: exit 5)
    P2 switch: the lock in trial, the deploy on the new digest (vLLM serving until just before
       Ray's restart on every node, then started, its /health identity wait), a crash loop cut
       short
    P3 gate: every node's containers on the new digest, one real completion, the bench gate
       (the new build benched, against the old one's runs: benchgate.py)
    P4 passed: the lock final, the history, every older image pruned but current and previous
    R  rollback: every node back on the previous digest and serving (exit 6), or not (exit 7)

The phases run on a `Runner`, the cluster as this module reaches it (`remote.Remote` over SSH
and the deploy; a fake one in tests/unit/test_upgrade.py); the lock is the real file.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from halo_cluster.config import lock as locks
from halo_cluster.config import rules
from halo_cluster.config.model import Cluster
from halo_cluster.config.quoting import quote
from halo_cluster.config.rules import image_name
from halo_cluster.tools import jsonout, options, reach
from halo_cluster.tools.benchresults import FAILED, GateResult, Side

OK, REFUSED, ABORTED, ROLLED_BACK, NOT_SERVING = 0, 1, 5, 6, 7
CRASH_LOOP = 3  # vLLM's restarts after the switch that end the wait at once (a build that dies)


@dataclass(frozen=True)
class LocalImage:
    """One image in a node's storage: its id, the digests it is known by, whether any
    container (a service's, the toolbox) is made from it."""

    id: str
    digests: tuple[str, ...]
    used: bool


class Runner(Protocol):
    """The cluster as the phases reach it; every method names what failed, never raises."""

    nodes: tuple[str, ...]

    def converged(self) -> str | None: ...  # why the cluster is not as its lock says, or None
    def resolve(self, reference: str) -> tuple[str | None, str]: ...  # the digest, or the error
    def pull(self, image: str) -> dict[str, tuple[float, str]]: ...  # node: (seconds, error)
    def versions(self, image: str) -> tuple[str, str]: ...  # Ray's and vLLM's inside it
    def append(self, line: str) -> None: ...  # one line of the head's history
    def switch(self, pinned: str, stop_first: bool = False) -> str | None: ...  # why it failed
    def running_other(self, pinned: str) -> dict[str, str]: ...  # node: what it runs instead
    def completion(self) -> str | None: ...  # why one completion failed, or None
    def downtime(self) -> float | None: ...  # seconds without a 200 since the last switch
    def local_images(self, node: str) -> list[LocalImage] | str: ...  # or why not read
    def remove_images(self, node: str, ids: list[str]) -> str: ...  # "" or the error
    def bench_left(self) -> Side: ...  # the serving build's bench runs, before the switch
    def bench(self, left: Side | None, baseline: str) -> GateResult: ...  # the new build's
    def states(self) -> dict[str, str]: ...  # node: its units' state and journal's last lines


@dataclass
class Gate:
    passed: bool
    checks: dict[str, str] = field(default_factory=dict)
    reason: str = ""


def bench_check(
    runner: Runner, left: Side | None, baseline: str, say: Callable[[str], None]
) -> tuple[str, str]:
    """The bench gate's one place: the new build's runs against `left`, the runs of the build
    being left (None: an interrupted upgrade gated again, whose old runs are the ones kept on
    `baseline`, its digest); each level's line said; (`passed`/`failed`/`skipped`/`baseline`,
    the reason when failed)."""
    result = runner.bench(left, baseline)
    for line in result.said:
        say(line)
    return result.status, result.reason if result.status == FAILED else ""


def prune_selection(images: list[LocalImage], keep: set[str]) -> list[str]:
    """The ids to remove on a node: every image of the cluster's name but the kept digests'
    (current and previous), and never one a container is made from."""
    return [i.id for i in images if not i.used and not keep.intersection(i.digests)]


def crash_looping(restarts: list[int], bound: int = CRASH_LOOP) -> bool:
    """vLLM's `NRestarts` read after the switch, in order: it rose by `bound` since its lowest
    reading (a start by hand resets the counter)."""
    low = None
    for count in restarts:
        low = count if low is None else min(low, count)
        if count - low >= bound:
            return True
    return False


def downtime(samples: list[tuple[float, int]]) -> float | None:
    """Seconds without a 200 from /health in the poller's (time, status) samples: from the last
    200 before the first other answer to the first 200 after the last one (None: no 200 after)."""
    down = [i for i, (_, status) in enumerate(samples) if status != 200]
    if not down:
        return 0.0
    after = [t for t, status in samples[down[-1] + 1 :] if status == 200]
    if not after:
        return None
    before = [t for t, status in samples[: down[0]] if status == 200]
    return after[0] - (before[-1] if before else samples[0][0])


@dataclass
class Upgrade:
    """The phases, on the lock at `lock_path` and the cluster `runner` reaches."""

    lock_path: Path
    reference: str  # cluster.yml's `image`
    runner: Runner
    say: Callable[[str], None] = print
    clock: Callable[[], float] = time.monotonic  # the tests' own clock measures the durations

    def lock(self) -> locks.Lock | None:
        found, problems = locks.read(self.lock_path)
        if problems:
            raise Refused(problems[0])
        return found

    def pinned(self, digest: str) -> str:
        return f"{image_name(self.reference)}@{digest}"

    def history(self, event: str, **fields) -> None:
        self.runner.append(locks.history_line(event, **fields))

    # P0-P4
    def upgrade(self, retry: bool = False, no_bench: bool = False, converged: bool = False) -> int:
        try:
            return self._upgrade(retry, no_bench, converged)
        except Refused as refusal:
            self.say(f"upgrade: {refusal}")
            return REFUSED

    def _upgrade(self, retry: bool, no_bench: bool, converged: bool) -> int:
        before = self.lock()
        if before is None:
            raise Refused(f"{self.lock_path}: no lock yet: a first deploy resolves the image")
        if before.trial:
            self.say(f"upgrade: {before.digest} was switched to but not gated: gating it")
            return self._gate_or_roll_back(before, no_bench, self.clock())
        why = None if converged else self.runner.converged()
        if why:
            raise Refused(f"the cluster is not as {self.lock_path.name} says: {why}")
        digest, error = self.runner.resolve(self.reference)
        if digest is None:
            raise Refused(f"image: {self.reference} could not be resolved on the head: {error}")
        changed = digest != before.digest
        self.history("resolved", reference=self.reference, digest=digest, changed=changed,
                     candidate=True)  # fmt: skip
        if not changed:
            since = before.serving_since or before.resolved or "?"
            self.say(f"nothing to do: {self.reference} is {digest} (serving since {since})")
            return OK
        rejected = next((r for r in before.rejected if r.digest == digest), None)
        if rejected and not retry:
            raise Refused(
                f"{digest} was rejected at {rejected.at} ({rejected.reason}): "
                "`halo-cluster upgrade --retry` tries it again"
            )
        started = self.clock()
        pulled = self._pull(digest)
        if pulled != OK:
            return pulled
        ray, vllm = self.runner.versions(self.pinned(digest))
        trial = replace(
            before,
            reference=self.reference,
            digest=digest,
            resolved=locks.now(),
            serving_since="",
            ray=ray,
            vllm=vllm,
            trial=True,
            previous=before.current(),
            rejected=tuple(r for r in before.rejected if r.digest != digest),
        )
        left = None
        if not no_bench:
            self.say("upgrade: benching the build being left, before the switch")
            left = self.runner.bench_left()
            if left.status == FAILED:
                self.say(
                    f"upgrade aborted: the bench of the build being left failed ({left.reason}); "
                    "nothing was restarted (`--no-bench` skips the bench gate this once)"
                )
                return ABORTED
        return self._switch_and_gate(trial, left, started, before)

    def _pull(self, digest: str) -> int:
        """P1: every node pulls at once; any failure aborts, nothing restarted."""
        image = self.pinned(digest)
        self.say(f"upgrade: pulling {image} on {', '.join(self.runner.nodes)} (still serving)")
        results = self.runner.pull(image)
        for node, (seconds, error) in results.items():
            if error:
                self.history("pull-failed", node=node, digest=digest, error=error)
            else:
                self.history("pulled", node=node, digest=digest, seconds=round(seconds, 1))
        failed = {node: error for node, (_, error) in results.items() if error}
        for node, error in failed.items():
            self.say(f"{node}: pull of {image} failed: {error}")
        if failed:
            self.say(
                f"upgrade aborted: {', '.join(failed)} could not pull {digest}; nothing was "
                "restarted, the cluster still serves its build (retry once the node pulls)"
            )
            return ABORTED
        return OK

    def _switch_and_gate(
        self, trial: locks.Lock, left: Side | None, started: float, before: locks.Lock
    ) -> int:
        """P2 and on: the lock in trial, the history, the deploy on the new digest; `left`, the
        bench runs of the build being left (None: `--no-bench`)."""
        locks.write(self.lock_path, trial)
        was = trial.previous.digest if trial.previous else ""
        self.history("switched", reference=self.reference, to=trial.digest, **{"from": was})
        return self._gate_or_roll_back(trial, left is None, started, before, left)

    def _gate_or_roll_back(
        self,
        trial: locks.Lock,
        no_bench: bool,
        started: float,
        before: locks.Lock | None = None,
        left: Side | None = None,
    ) -> int:
        """`before`: the lock as it was before this upgrade's switch (None when an interrupted
        upgrade is gated again: that lock is gone), which a rollback restores; `left`, the
        bench runs of the build being left (None when gated again: its kept runs stand in)."""
        pinned = self.pinned(trial.digest)
        self.say(f"upgrade: switching every node to {pinned}")
        baseline = trial.previous.digest if trial.previous else ""
        gate = self.gate(pinned, self.runner.switch(pinned), no_bench, baseline, left)
        seconds = self.runner.downtime()
        shown = f"{seconds:.1f} s" if seconds is not None else "not serving again yet"
        self.say(f"downtime: {shown} without a 200 from /health")
        self.history("gate", digest=trial.digest, passed=gate.passed, checks=gate.checks,
                     reason=gate.reason, downtime_s=seconds)  # fmt: skip
        if not gate.passed:
            return self.roll_back(
                trial, f"gate failed: {gate.reason}", by_hand=False, before=before
            )
        serving = replace(trial, trial=False, serving_since=locks.now())
        locks.write(self.lock_path, serving)
        self.history("serving", digest=serving.digest, since=serving.serving_since)
        self.say(f"upgraded: every node serves {pinned} (took {self.clock() - started:.0f} s)")
        self.prune(serving)
        return OK

    def gate(
        self,
        pinned: str,
        switch_error: str | None,
        no_bench: bool,
        baseline: str = "",
        left: Side | None = None,
    ) -> Gate:
        """P3: the deploy's identity wait passed, every node runs `pinned`, one completion is
        answered with the model; then the bench gate against `left` (`bench_check`)."""
        checks = {"identity": "failed", "completion": "skipped", "bench": "skipped"}
        if switch_error:
            return Gate(False, checks, switch_error)
        other = self.runner.running_other(pinned)
        if other:
            node, runs = next(iter(other.items()))
            return Gate(False, checks, f"identity: {node} runs {runs}, not {pinned}")
        checks["identity"] = "passed"
        error = self.runner.completion()
        checks["completion"] = "failed" if error else "passed"
        if error:
            return Gate(False, checks, f"completion: {error}")
        if no_bench:
            return Gate(True, checks)
        checks["bench"], why = bench_check(self.runner, left, baseline, self.say)
        return Gate(checks["bench"] != "failed", checks, f"bench: {why}" if why else "")

    def prune(self, serving: locks.Lock) -> None:
        """P4's pruning on every node; an error is a warning (the next passed gate retries)."""
        keep = {serving.digest, *([serving.previous.digest] if serving.previous else [])}
        for node in self.runner.nodes:
            images = self.runner.local_images(node)
            if isinstance(images, str):
                self.say(f"{node}: warning: images not pruned: {images}")
                continue
            ids = prune_selection(images, keep)
            if not ids:
                continue
            error = self.runner.remove_images(node, ids)
            if error:
                self.say(f"{node}: warning: images not pruned: {error}")
                continue
            removed = sorted({d for i in images if i.id in ids for d in i.digests})
            self.history("pruned", node=node, digests=removed)
            self.say(f"{node}: pruned {len(ids)} older image(s) of {image_name(self.reference)}")

    # R
    def roll_back(
        self, failed: locks.Lock, reason: str, by_hand: bool, before: locks.Lock | None = None
    ) -> int:
        """Every node back on `failed.previous`: the lock first (the deploy reads it), then the
        same switch and the gate's identity and completion, no bench."""
        back = failed.previous
        if back is None:
            self.say(f"{reason}; no previous build to roll back to: {failed.digest} stays")
            return NOT_SERVING
        restored = self._restored(failed, back, reason, by_hand, before)
        locks.write(self.lock_path, restored)
        moved = {"from": failed.digest, "to": back.digest}
        self.history("switched", reference=restored.reference, **moved)
        # the name the restored lock pins, which the deploy renders: the reference before an
        # upgrade to another repository name
        pinned = f"{image_name(restored.reference)}@{back.digest}"
        self.say(f"rollback: every node back to {pinned}")
        # from the rollback's own switch: the pull and the failed build's time are not its
        switched = self.clock()
        # after a failed gate the build being left may crash-loop through the deploy: stopped
        # first, its restarts neither touch Ray nor count in the rollback's own watch
        switch_error = self.runner.switch(pinned, stop_first=not by_hand)
        gate = self.gate(pinned, switch_error, no_bench=True)
        seconds = round(self.clock() - switched, 1)
        if not gate.passed:
            nodes = self.runner.states()
            self.history("rollback-failed", digest=back.digest, nodes=nodes)
            self.say(f"{reason}; the rollback to {back.digest} does not serve: {gate.reason}")
            for node, state in nodes.items():
                self.say(f"  {node}: {state}")
            return NOT_SERVING
        locks.write(self.lock_path, replace(restored, serving_since=locks.now()))
        self.history("rolled-back", to=back.digest, reason=reason, by_hand=by_hand,
                     seconds=seconds, **{"from": failed.digest})  # fmt: skip
        self.history("serving", digest=back.digest, since=locks.now())
        said = "" if by_hand else f"{reason}; "
        self.say(
            f"{said}rolled back from {failed.digest} to {back.digest} "
            f"(serving again after {seconds} s)"
        )
        return OK if by_hand else ROLLED_BACK

    @staticmethod
    def _restored(
        failed: locks.Lock,
        back: locks.Build,
        reason: str,
        by_hand: bool,
        before: locks.Lock | None,
    ) -> locks.Lock:
        """The lock the rollback writes. By hand, current and previous swap (a second rollback
        returns). After a failed gate, the lock as it was before the upgrade, its `previous`
        kept (the way back `rollback` and `status` still know), plus the build `rejected`."""
        if by_hand:
            return replace(
                failed,
                digest=back.digest,
                resolved=back.resolved,
                ray=back.ray,
                vllm=back.vllm,
                serving_since="",
                trial=False,
                previous=failed.current(),
            )
        rejected = (*failed.rejected, locks.Rejected(failed.digest, locks.now(), reason))
        if before is None:  # an interrupted upgrade gated again: the build before is not known
            before = replace(failed, previous=None, **_fields(back))
        # its own reference too: after an upgrade to another repository name, the name D0 has
        return replace(before, serving_since="", trial=False, rejected=rejected)

    def rollback(self) -> int:
        """`halo-cluster rollback`: from the lock's current to its previous, by hand."""
        try:
            current = self.lock()
        except Refused as refusal:
            self.say(f"rollback: {refusal}")
            return REFUSED
        if current is None or current.previous is None:
            self.say(f"rollback: {self.lock_path} records no previous build to go back to")
            return REFUSED
        pulled = self._pull(current.previous.digest)
        if pulled != OK:
            return pulled
        return self.roll_back(current, "by hand", by_hand=True)


def _fields(build: locks.Build) -> dict[str, str]:
    """A build's fields as the lock's current ones."""
    return {"digest": build.digest, "resolved": build.resolved, "ray": build.ray,
            "vllm": build.vllm}  # fmt: skip


class Refused(Exception):
    """P0 refused: one line, nothing changed (exit 1)."""


def _parser(command: str, about: str) -> options.Parser:
    return options.parser(f"halo-cluster {command}", about, REFUSED)


def _run(
    command: str,
    phases: Callable[[Upgrade], int],
    refusal: Callable[[Cluster], str | None],
    seen: dict | None = None,
) -> int:
    """Load the config (as an upgrade's deploy does), refuse it in `refusal`'s line, reach
    the cluster, run `phases`; `seen` gets the nodes it could not reach, and the lock's path."""
    from halo_cluster.tools import project, remote

    os.environ[locks.UPGRADING] = "1"  # this run's loads and deploys: see lock.UPGRADING
    path = project.config()
    cluster = project.load_or_say(path)
    if cluster is None:
        return REFUSED
    if problem := refusal(cluster):
        print(f"halo-cluster {command}: {problem}", file=sys.stderr)
        return REFUSED
    found = project.files()
    if found is None:
        print(f"halo-cluster {command}: no deploy.py to run: reinstall it", file=sys.stderr)
        return REFUSED
    lock_path = Path(cluster.container.lock)
    with remote.Remote(cluster, path, found) as nodes:
        # every node answers before anything runs: else each step would say the same node again
        down = reach.probe(list(cluster.nodes), nodes.ssh_config)
        for node in cluster.nodes:
            if node.name in down:
                print(f"halo-cluster {command}: {reach.said(node, down[node.name])}")
        nodes.unreachable = down
        if down:
            print(f"halo-cluster {command}: stopped before anything changed: "
                  f"{', '.join(down)} cannot be reached (above)")  # fmt: skip
        code = REFUSED if down else phases(Upgrade(lock_path, cluster.container.reference, nodes))
        if seen is not None:
            seen.update(lock=lock_path, unreachable=nodes.unreachable)
        return code


def main_upgrade(argv: list[str], converged: bool = False) -> int:
    """`halo-cluster upgrade`: exit 0 upgraded or nothing to do, 1 refused, 5 aborted before the
    switch, 6 gate failed and rolled back, 7 not serving after the rollback (docs/ci.md)."""
    parser = _parser("upgrade", main_upgrade.__doc__ or "")
    parser.value("--image", "REF", "default: cluster.yml's image", rule=rules.image_reference)
    parser.flag("--retry", "admit a rejected digest")
    parser.flag("--no-bench", "skip the bench gate this once")
    parser.flag("--json", "the result as one JSON document on stdout (the progress on stderr)")
    args = parser.parse_args(argv)

    def upgrade(up: Upgrade) -> int:
        return up.upgrade(retry=args.retry, no_bench=args.no_bench, converged=converged)

    def run(seen: dict | None = None) -> int:
        return _run("upgrade", upgrade, lambda cluster: _other_image(args.image, cluster), seen)

    if not args.json:
        return run()
    seen: dict = {}
    with jsonout.stdout_to_stderr():
        code = run(seen)
    print(json.dumps(result(code, seen), indent=2))
    return code


def result(code: int, seen: dict) -> dict:
    """An upgrade's result for --json: its exit code and what it means (docs/ci.md), the
    lock's builds after it, and each node it could not reach with why ("unknown" when the
    run stopped before it read the nodes)."""
    from halo_cluster.tools.commands import exits

    lock = locks.read(seen["lock"])[0] if "lock" in seen else None
    return {
        "exit_code": code,
        "result": dict(exits.EXITS["upgrade"]).get(code, "?"),
        "digest": lock.digest if lock else reach.UNKNOWN,
        "previous": (lock.previous.digest if lock.previous else None) if lock else reach.UNKNOWN,
        "trial": lock.trial if lock else reach.UNKNOWN,
        "unreachable": seen.get("unreachable", reach.UNKNOWN),
    }


def _other_image(image: str | None, cluster: Cluster) -> str | None:
    """Why `--image` is refused: it must be cluster.yml's image, so that the config and the
    lock agree."""
    reference = cluster.container.reference
    if image is None or image == reference:
        return None
    return (
        f"--image {quote(image)} is not cluster.yml's image ({quote(reference)}): set "
        "image: to it in cluster.yml first, so that the config and the lock agree"
    )


def main_rollback(argv: list[str]) -> int:
    """`halo-cluster rollback`: every node back on the lock's previous build; exit 0 serving it,
    1 no previous build or refused, 5 its pull failed, 7 not serving (docs/ci.md)."""
    _parser("rollback", main_rollback.__doc__ or "").parse_args(argv)
    return _run("rollback", Upgrade.rollback, lambda _: None)
