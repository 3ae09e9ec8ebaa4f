"""`halo-cluster upgrade` and `rollback`'s start-up: the options, the config as an upgrade's
deploy loads it, every node reached before anything runs, the phases (image.py), `--json`.

Both move the whole cluster or nothing (every rank of the model must run one image): a
`--limit` or `--exclude` that leaves a node out is refused in one line (exit 1, the commands'
usage error), an unknown node's name too."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from halo_cluster.config import lock as locks
from halo_cluster.config import rules
from halo_cluster.config.model import Cluster
from halo_cluster.config.quoting import quote
from halo_cluster.tools import jsonout, options, project, reach, selection
from halo_cluster.tools.commands import exits
from halo_cluster.tools.upgrading import nodes
from halo_cluster.tools.upgrading.image import Upgrade
from halo_cluster.tools.upgrading.imagenodes import ImageNodes
from halo_cluster.tools.upgrading.machine import REFUSED


def _parser(command: str, about: str) -> options.Parser:
    parser = options.parser(f"halo-cluster {command}", about, REFUSED)
    selection.add(parser)
    return parser


def whole(args: argparse.Namespace, cluster: Cluster) -> str | None:
    """Why a selection is refused: it leaves a node out, or names none of the config's."""
    try:
        chosen = selection.select(cluster, args.limit, args.exclude)
    except selection.Refused as refused:
        return str(refused)
    out = selection.left_out(cluster, chosen)
    if not out:
        return None
    return (
        f"{', '.join(out)} left out by --limit/--exclude: the image moves every node at once "
        "(every rank of the model must run one image); run it without them"
    )


def _run(
    command: str,
    phases: Callable[[Upgrade], int],
    refusal: Callable[[Cluster], str | None],
    seen: dict | None = None,
) -> int:
    """Load the config (as an upgrade's deploy does), refuse it in `refusal`'s line, reach
    the cluster, run `phases`; `seen` gets the nodes it could not reach, and the lock's path."""
    with _upgrading():
        return _started(command, phases, refusal, seen)


@contextmanager
def _upgrading() -> Iterator[None]:
    """This run's loads and deploys are the upgrade's (lock.UPGRADING), and only this run's:
    a command run in the same process after it (the tests, `deploy`'s image_update) is not."""
    before = os.environ.get(locks.UPGRADING)
    os.environ[locks.UPGRADING] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(locks.UPGRADING, None)
        else:
            os.environ[locks.UPGRADING] = before


def _started(
    command: str,
    phases: Callable[[Upgrade], int],
    refusal: Callable[[Cluster], str | None],
    seen: dict | None,
) -> int:
    started = nodes.start(command)
    if started is None:
        return REFUSED
    cluster, files = started
    if problem := refusal(cluster):
        print(f"halo-cluster {command}: {problem}", file=sys.stderr)
        return REFUSED
    lock_path = Path(cluster.container.lock)
    with nodes.connected(
        f"halo-cluster {command}", cluster, project.config(), files, ImageNodes
    ) as reached:
        # every node answers before anything runs: else each step would say the same node again
        down = reached.ssh.probe(reach.PROBE_SECONDS)
        for node in cluster.nodes:
            if node.name in down:
                print(f"halo-cluster {command}: {reach.said(node, down[node.name])}")
        reached.unreachable = down
        if down:
            print(f"halo-cluster {command}: stopped before anything changed: "
                  f"{', '.join(down)} cannot be reached (above)")  # fmt: skip
        code = REFUSED if down else phases(Upgrade(lock_path, cluster.container.reference, reached))
        if seen is not None:
            seen.update(lock=lock_path, unreachable=reached.unreachable)
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

    def refusal(cluster: Cluster) -> str | None:
        return whole(args, cluster) or _other_image(args.image, cluster) or _unlocked(cluster)

    if not args.json:
        return _run("upgrade", upgrade, refusal)
    seen: dict = {}
    with jsonout.stdout_to_stderr():
        code = _run("upgrade", upgrade, refusal, seen)
    # refused: stopped before its work, for the reason it said
    error = (jsonout.said() or "refused") if code == REFUSED else None
    jsonout.emit("upgrade", result(code, seen) | {"error": error})
    return code


def result(code: int, seen: dict) -> dict:
    """An upgrade's result for --json: its exit code and what it means (docs/ci.md), the
    lock's builds after it, and each node it could not reach with why (null when the run
    stopped before it read the lock or the nodes: documents.py)."""
    lock = locks.read(seen["lock"])[0] if "lock" in seen else None
    return {
        "exit_code": code,
        "result": dict(exits.EXITS["upgrade"]).get(code, "?"),
        "digest": lock.digest if lock else None,
        "previous": lock.previous.digest if lock and lock.previous else None,
        "trial": lock.trial if lock else None,
        "unreachable": seen.get("unreachable"),
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
    args = _parser("rollback", main_rollback.__doc__ or "").parse_args(argv)

    def refusal(cluster: Cluster) -> str | None:
        return whole(args, cluster) or _unlocked(cluster, way_back=True)

    return _run("rollback", Upgrade.rollback, refusal)


def _unlocked(cluster: Cluster, way_back: bool = False) -> str | None:
    """Why the lock refuses the run before any node is reached (the phases ask it again, for a
    lock changed since): unreadable, none yet, or, WAY_BACK (rollback), no previous build."""
    path = Path(cluster.container.lock)
    found, problems = locks.read(path)
    if problems:
        return problems[0]
    if way_back and (found is None or found.previous is None):
        return f"{path} records no previous build to go back to"
    return f"{path}: no lock yet: a first deploy resolves the image" if found is None else None
