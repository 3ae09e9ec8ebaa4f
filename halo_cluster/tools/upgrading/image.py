"""`halo-cluster upgrade`: the cluster moved to another build of its image as one
(docs/roles/container.md, docs/design/day-after.md section 4).

    P0 identity: the lock, a converged cluster, the head's resolve of the image (equal: exit 0)
    P1 pull the new digest on every node at once while the old build serves (a failure: exit 5),
       then the old build benched for the gate (a run that cannot measure: exit 5)
    P2 switch: the lock in trial, the deploy on the new digest (vLLM serving until just before
       Ray's restart on every node, then started, its /health identity wait), a crash loop cut
       short
    P3 gate: every node's containers on the new digest, one real completion, the bench gate
       (the new build benched, against the old one's runs: bench/gate.py)
    P4 passed: the lock final, the history, every older image pruned but current and previous
    R  rollback (rollback.py): every node back on the previous digest and serving (exit 6), or
       not (exit 7)

The phases run on an `ImageReach` (imagenodes.py on a real cluster, the fake one in
tests/unit/helpers_upgrade.py); the lock is the real file.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from halo_cluster.config import lock as locks
from halo_cluster.tools.bench.results import FAILED, Side
from halo_cluster.tools.upgrading import rollback
from halo_cluster.tools.upgrading.imagegate import ImageRun
from halo_cluster.tools.upgrading.machine import ABORTED, OK, REFUSED, Stop


@dataclass
class Upgrade(ImageRun):
    """The phases, on the lock at `lock_path` and the cluster `runner` reaches."""

    def upgrade(self, retry: bool = False, no_bench: bool = False, converged: bool = False) -> int:
        try:
            return self._upgrade(retry, no_bench, converged)
        except Stop as refusal:
            self.say(f"upgrade: {refusal.line}")
            return refusal.code

    def rollback(self) -> int:
        """`halo-cluster rollback`: from the lock's current to its previous, by hand."""
        return rollback.by_hand(self)

    def _upgrade(self, retry: bool, no_bench: bool, converged: bool) -> int:
        before = self.lock()
        if before is None:
            raise Stop(REFUSED, f"{self.lock_path}: no lock yet: a first deploy resolves the image")
        if before.trial:
            self.say(f"upgrade: {before.digest} was switched to but not gated: gating it")
            return self._gate_or_roll_back(before, no_bench, self.clock())
        why = None if converged else self.runner.converged()
        if why:
            raise Stop(REFUSED, f"the cluster is not as {self.lock_path.name} says: {why}")
        digest, error = self.runner.resolve(self.reference)
        if digest is None:
            raise Stop(
                REFUSED, f"image: {self.reference} could not be resolved on the head: {error}"
            )
        changed = digest != before.digest
        self.history("resolved", reference=self.reference, digest=digest, changed=changed,
                     candidate=True)  # fmt: skip
        if not changed:
            since = before.serving_since or before.resolved or "?"
            self.say(f"nothing to do: {self.reference} is {digest} (serving since {since})")
            return OK
        rejected = next((r for r in before.rejected if r.digest == digest), None)
        if rejected and not retry:
            raise Stop(
                REFUSED,
                f"{digest} was rejected at {rejected.at} ({rejected.reason}): "
                "`halo-cluster upgrade --retry` tries it again",
            )
        started = self.clock()
        pulled = self.pull(digest)
        if pulled != OK:
            return pulled
        trial = self._trial(before, digest)
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

    def _trial(self, before: locks.Lock, digest: str) -> locks.Lock:
        """The lock P2 writes: the new digest in trial, the build left its `previous`."""
        ray, vllm = self.runner.versions(self.pinned(digest))
        return replace(
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

    def _switch_and_gate(
        self, trial: locks.Lock, left: Side | None, started: float, before: locks.Lock
    ) -> int:
        """P2 and on: the lock in trial, the history, the deploy on the new digest; `left`, the
        bench runs of the build being left (None: `--no-bench`)."""
        trial = self.write_image(trial)
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
            reason = f"gate failed: {gate.reason}"
            return rollback.roll_back(self, trial, reason, by_hand=False, before=before)
        serving = self.write_image(replace(trial, trial=False, serving_since=locks.now()))
        self.history("serving", digest=serving.digest, since=serving.serving_since)
        self.say(f"upgraded: every node serves {pinned} (took {self.clock() - started:.0f} s)")
        self.prune(serving)
        return OK
