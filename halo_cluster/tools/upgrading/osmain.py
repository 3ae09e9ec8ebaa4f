"""`halo-cluster upgrade --os`'s start-up: the options (each target refused by its rule before
the config is read), the nodes chosen, the phases (osupgrade.py) over `Nodes`.

A kernel is per node, so a node in maintenance may stay on its old kernel for a while: with
`--limit` or `--exclude` leaving a node out, the upgrade refuses (exit 1) unless `--partial` is
given; then it upgrades only the chosen nodes, in the usual order, and says which stay."""

from __future__ import annotations

import sys

from halo_cluster.tools import options, project, selection
from halo_cluster.tools.upgrading import nodes
from halo_cluster.tools.upgrading.kernels import Targets, target_rule
from halo_cluster.tools.upgrading.machine import REFUSED
from halo_cluster.tools.upgrading.osupgrade import PROG, Upgrade, stays


def parser() -> options.Parser:
    found = options.parser(PROG, __doc__, REFUSED)
    found.flag("--os", "the kernel and firmware, not the image", required=True)
    found.value(
        "--kernel", "VERSION", "kernel-core's EVR, 6.18.9-200.fc43", rule=target_rule("--kernel")
    )
    found.value(
        "--firmware", "VERSION", "amd-gpu-firmware's, 20260110-1.fc43",
        rule=target_rule("--firmware"),
    )  # fmt: skip
    selection.add(found)
    found.flag("--partial", "upgrade only the nodes --limit/--exclude leave (the others stay)")
    return found


def partial_refusal(left_out: list[str], partial: bool) -> str | None:
    """Why a selection is refused: it leaves nodes out without `--partial`."""
    if not left_out or partial:
        return None
    return (
        f"{', '.join(left_out)} left out by --limit/--exclude: every node gets the new kernel "
        "unless --partial is given (then the nodes left out stay on their old kernel)"
    )


def main(args: list[str]) -> int:
    found = parser()
    # each refused in one line with exit 1 before the config is read
    parsed = found.parse_args(args)
    if not (parsed.kernel or parsed.firmware):
        found.error("give --kernel VERSION, --firmware VERSION or both")
    started = nodes.start("upgrade")
    if started is None:
        return REFUSED
    cluster, files = started
    chosen = nodes.chosen(PROG, cluster, parsed)
    if chosen is None:
        return REFUSED
    out = selection.left_out(cluster, chosen)
    if problem := partial_refusal(out, parsed.partial):
        print(f"{PROG}: {problem}", file=sys.stderr)
        return REFUSED
    if out:
        print(f"{PROG}: --partial: {stays(out)}")
    targets = Targets(parsed.kernel, parsed.firmware)
    with nodes.connected(PROG, cluster, project.config(), files, nodes.Nodes) as reached:
        return Upgrade(cluster, targets, reached, chosen).upgrade()
