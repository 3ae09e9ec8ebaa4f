"""The lab states e2e tests start from (docs/testing.md), and how a test gets one.

A state is a lab shape and the config deployed on it. `reach` brings the lab to one:
- the lab runs with the state's shape (the tests that need one state run one after another,
  `lab_needed` in conftest.py): a deploy of its config brings back what the tests before changed,
  a no-op when they changed nothing, as a user's re-run would (about 2 s);
- the lab is down or of another shape: the state's snapshot is restored (`python -m lab
  restore`, about 14 s, vLLM serving about 4 s later, no deploy); with no fresh snapshot (a
  first run, a changed source: the key covers every file that shapes it, lab/snapshot.py) the
  state is deployed on fresh nodes, or on its parent state, and saved (`python -m lab
  snapshot`) for the next time.

A restore costs about what a deploy that restarts the services costs (docs/performance.md,
`make test`), so it is taken only where the old way was a converge from nothing. This file is
one of the snapshots' key sources: a change to a state's recipe makes its snapshot stale.
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


def reach(state: State, clean: bool = False) -> Lab:
    """The lab in `state` (see the module's text for how); `clean`: restored even when a lab of
    its shape runs."""
    lab = Lab(state.nodes, "roce")
    if not clean and cli.is_up(state.nodes, "roce"):
        lab.ensure_converged(state.extra)
    elif snapshot.fresh(state.name):
        lab.lab("restore", state.name)
    else:
        build(lab, state)
    if state.serving:
        wait_serving(lab)
    return lab


def build(lab: Lab, state: State) -> None:
    """Deploy `state` from its parent (restored) or from fresh nodes, then save it (and throw
    it away again when a source changed meanwhile: its key would not be what deployed it)."""
    key = snapshot.key()
    if state.parent:
        reach(state.parent, clean=True)
    else:
        lab.fresh()
    lab.ensure_converged(state.extra)
    if state.serving:
        wait_serving(lab)
    lab.lab("snapshot", state.name)
    if snapshot.key() != key:
        lab.lab("forget", state.name)
