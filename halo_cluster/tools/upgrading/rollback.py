"""The image's way back (R): every node on the lock's previous build, after a failed gate
(`roll_back`, exit 6) or by hand (`by_hand`, `halo-cluster rollback`); 7 when it does not serve."""

from __future__ import annotations

from dataclasses import replace

from halo_cluster.config import lock as locks
from halo_cluster.config.rules import image_name
from halo_cluster.tools.upgrading.imagegate import ImageRun
from halo_cluster.tools.upgrading.machine import NOT_SERVING, OK, REFUSED, ROLLED_BACK, Stop


def roll_back(
    run: ImageRun,
    failed: locks.Lock,
    reason: str,
    by_hand: bool,
    before: locks.Lock | None = None,
) -> int:
    """Every node back on `failed.previous`: the lock first (the deploy reads it), then the
    same switch and the gate's identity and completion, no bench."""
    back = failed.previous
    if back is None:
        run.say(f"{reason}; no previous build to roll back to: {failed.digest} stays")
        return NOT_SERVING
    restored = run.write_image(_restored(failed, back, reason, by_hand, before))
    moved = {"from": failed.digest, "to": back.digest}
    run.history("switched", reference=restored.reference, **moved)
    # the name the restored lock pins, which the deploy renders: the reference before an
    # upgrade to another repository name
    pinned = f"{image_name(restored.reference)}@{back.digest}"
    run.say(f"rollback: every node back to {pinned}")
    # from the rollback's own switch: the pull and the failed build's time are not its
    switched = run.clock()
    # after a failed gate the build being left may crash-loop through the deploy: stopped
    # first, its restarts neither touch Ray nor count in the rollback's own watch
    switch_error = run.runner.switch(pinned, stop_first=not by_hand)
    gate = run.gate(pinned, switch_error, no_bench=True)
    seconds = round(run.clock() - switched, 1)
    if not gate.passed:
        nodes = run.runner.states()
        run.history("rollback-failed", digest=back.digest, nodes=nodes)
        run.say(f"{reason}; the rollback to {back.digest} does not serve: {gate.reason}")
        for node, state in nodes.items():
            run.say(f"  {node}: {state}")
        return NOT_SERVING
    run.write_image(replace(restored, serving_since=locks.now()))
    run.history("rolled-back", to=back.digest, reason=reason, by_hand=by_hand,
                seconds=seconds, **{"from": failed.digest})  # fmt: skip
    run.history("serving", digest=back.digest, since=locks.now())
    said = "" if by_hand else f"{reason}; "
    run.say(
        f"{said}rolled back from {failed.digest} to {back.digest} (serving again after {seconds} s)"
    )
    return OK if by_hand else ROLLED_BACK


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
    as_current = {"digest": back.digest, "resolved": back.resolved, "ray": back.ray,
                  "vllm": back.vllm}  # fmt: skip
    if by_hand:
        return replace(
            failed, **as_current, serving_since="", trial=False, previous=failed.current()
        )
    rejected = (*failed.rejected, locks.Rejected(failed.digest, locks.now(), reason))
    if before is None:  # an interrupted upgrade gated again: the build before is not known
        before = replace(failed, previous=None, **as_current)
    # its own reference too: after an upgrade to another repository name, the name D0 has
    return replace(before, serving_since="", trial=False, rejected=rejected)


def by_hand(run: ImageRun) -> int:
    """`halo-cluster rollback`: from the lock's current to its previous, its pull first."""
    try:
        current = run.lock()
    except Stop as stop:
        run.say(f"rollback: {stop.line}")
        return REFUSED
    if current is None or current.previous is None:
        run.say(f"rollback: {run.lock_path} records no previous build to go back to")
        return REFUSED
    pulled = run.pull(current.previous.digest)
    if pulled != OK:
        return pulled
    try:
        return roll_back(run, current, "by hand", by_hand=True)
    except Stop as stop:  # the lock became unreadable while the rollback ran
        run.say(f"rollback: {stop.line}")
        return stop.code
