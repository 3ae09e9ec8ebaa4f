"""The image phases' shared part (image.py's upgrade, rollback.py's way back): the cluster as
they reach it (`ImageReach`), the lock and history of one run (`ImageRun`), the gate (identity,
one completion, the bench gate) and the prune, with their pure parts."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from halo_cluster.config import lock as locks
from halo_cluster.config.rules import image_name
from halo_cluster.tools.bench.results import FAILED, GateResult, Side
from halo_cluster.tools.upgrading.machine import ABORTED, OK, REFUSED, Reach, Stop, record

CRASH_LOOP = 3  # vLLM's restarts after the switch that end the wait at once (a build that dies)


@dataclass(frozen=True)
class LocalImage:
    """One image in a node's storage: its id, the digests it is known by, whether any
    container (a service's, the toolbox) is made from it."""

    id: str
    digests: tuple[str, ...]
    used: bool


class ImageReach(Reach, Protocol):
    """What the image phases add to `Reach`; every method names what failed, never raises."""

    names: tuple[str, ...]  # the nodes' names, in config order

    def converged(self) -> str | None: ...  # why the cluster is not as its lock says, or None
    def resolve(self, reference: str) -> tuple[str | None, str]: ...  # the digest, or the error
    def pull(self, image: str) -> dict[str, tuple[float, str]]: ...  # node: (seconds, error)
    def versions(self, image: str) -> tuple[str, str]: ...  # Ray's and vLLM's inside it
    def switch(self, pinned: str, stop_first: bool = False) -> str | None: ...  # why it failed
    def running_other(self, pinned: str) -> dict[str, str]: ...  # node: what it runs instead
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
class ImageRun:
    """One image run: the lock at `lock_path`, cluster.yml's `reference`, the cluster `runner`
    reaches; `say` its lines, `clock` its durations (the tests' own)."""

    lock_path: Path
    reference: str  # cluster.yml's `image`
    runner: ImageReach
    say: Callable[[str], None] = print
    clock: Callable[[], float] = time.monotonic

    def lock(self) -> locks.Lock | None:
        found, problems = locks.read(self.lock_path)
        if problems:
            raise Stop(REFUSED, problems[0])
        return found

    def write_image(self, lock: locks.Lock) -> locks.Lock:
        """`lock`'s image (its build, trial, previous, rejected) written into the lock as it is
        now, under its file lock: the deploys this run started may have recorded members or a
        pin since it was read, and they stay."""
        written, problems = locks.update(self.lock_path, lambda now: locks.with_image(now, lock))
        if written is None:
            raise Stop(REFUSED, problems[0])
        return written

    def pinned(self, digest: str) -> str:
        return f"{image_name(self.reference)}@{digest}"

    def history(self, event: str, **fields: object) -> None:
        record(self.runner, event, **fields)

    def pull(self, digest: str) -> int:
        """P1 (and the rollback's): every node pulls at once; any failure aborts, nothing
        restarted."""
        image = self.pinned(digest)
        self.say(f"upgrade: pulling {image} on {', '.join(self.runner.names)} (still serving)")
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

    def bench_check(self, left: Side | None, baseline: str) -> tuple[str, str]:
        """The bench gate's one place: the new build's runs against `left`, the runs of the
        build being left (None: an interrupted upgrade gated again, whose old runs are the
        ones kept on `baseline`, its digest); each level's line said; (`passed`/`failed`/
        `skipped`/`baseline`, the reason when failed)."""
        result = self.runner.bench(left, baseline)
        for line in result.said:
            self.say(line)
        return result.status, result.reason if result.status == FAILED else ""

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
        checks["bench"], why = self.bench_check(left, baseline)
        return Gate(checks["bench"] != "failed", checks, f"bench: {why}" if why else "")

    def prune(self, serving: locks.Lock) -> None:
        """P4's pruning on every node; an error is a warning (the next passed gate retries)."""
        keep = {serving.digest, *([serving.previous.digest] if serving.previous else [])}
        for node in self.runner.names:
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
