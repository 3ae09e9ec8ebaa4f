"""The lab states e2e tests start from, each deployed once and then saved as a lab snapshot
(`python -m lab snapshot NAME`, lab/snapshot.py), restored for the tests that need it instead of
converged again (docs/lab.md, "Snapshots"; docs/testing.md, a new e2e test on a saved state).

A state is a lab shape and the config deployed on it. `reach` brings the lab to one:
- the lab is in it already, as the last test that asked for it left it: a deploy of its config
  brings back what that test changed (a no-op when nothing), as a user's re-run would;
- `clean`, or the lab is another shape or state: the state's snapshot is restored (seconds of
  copying and a boot, no deploy); with no fresh snapshot (a first run, a changed source: the key
  covers every file that shapes it) the state is deployed from its parent and saved.

This file is one of the snapshots' key sources: a change to a state's recipe here makes its
snapshot stale.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab import cli, snapshot
from tests.e2e.conftest import Lab
from tests.e2e.serving_lab import SERVE, wait_serving


@dataclass(frozen=True)
class State:
    """`nodes` lab nodes on a RoCE link, deployed with `reboot: if-needed` and `extra` over the
    lab's cluster.yml (`parent`: the state it is deployed from; none: fresh nodes); `serving`:
    vLLM's /health answers 200 before a test starts."""

    name: str
    nodes: int
    extra: str
    parent: State | None = None
    serving: bool = False


CONVERGED = State("converged", 2, "")
SERVING = State("serving", 2, SERVE, parent=CONVERGED, serving=True)
STATES = (CONVERGED, SERVING)


def reach(state: State, clean: bool = False) -> Lab:
    """The lab in `state` (see the module's text for how)."""
    lab = Lab(state.nodes, "roce")
    if not clean and at(state):
        lab.ensure_converged(state.extra)
    elif snapshot.fresh(state.name):
        lab.lab("restore", state.name)
    else:
        build(lab, state)
    if state.serving:
        wait_serving(lab)
    return lab


def build(lab: Lab, state: State) -> None:
    """Deploy `state` from its parent (restored) or from fresh nodes, then save it."""
    if state.parent:
        reach(state.parent, clean=True)
    else:
        lab.fresh()
    lab.ensure_converged(state.extra)
    if state.serving:
        wait_serving(lab)
    lab.lab("snapshot", state.name)


def at(state: State) -> bool:
    """The lab runs as restored from (or saved as) `state`'s snapshot, whatever a test deployed
    on it since (`lab up` of new nodes forgets it)."""
    return cli.load_state().get("snapshot") == state.name and cli.is_up(state.nodes, "roce")
