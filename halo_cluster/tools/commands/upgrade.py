"""`halo-cluster upgrade [--os]`: the image's new build on every node, or with `--os` a new
kernel and firmware (halo_cluster/tools/upgrading/: imagemain.py, osmain.py)."""

from __future__ import annotations

from halo_cluster.tools.commands import text

NAME = "upgrade"
SUMMARY = "every node to the image's new build (pull, switch, gate); --os: kernel and firmware"
OPTIONS = (
    ("--image REF", "the image to move to; it must be cluster.yml's `image:`"),
    ("--retry", "admit a build an earlier upgrade rejected"),
    ("--no-bench", "skip the bench gate this once"),
    ("--json", "the result as one JSON document on stdout (the progress on stderr)"),
    ("--limit NODE", "only this node (repeatable): the image refuses it, --os with --partial"),
    ("--exclude NODE", "every node but this one (repeatable): as --limit"),
    ("--os", "upgrade the kernel and firmware instead (with --kernel, --firmware)"),
    ("--kernel VERSION", "with --os: the kernel-core version, as 6.18.9-200.fc43"),
    ("--firmware VERSION", "with --os: the amd-gpu-firmware version, as 20260110-1.fc43"),
    ("--partial", "with --os and --limit/--exclude: upgrade only those nodes; the rest stay"),
)
HELP = text.page(
    "halo-cluster upgrade [--image REF] [--retry] [--no-bench] [--json]\n"
    "       halo-cluster upgrade --os [--kernel VERSION] [--firmware VERSION]\n"
    "                            [--limit NODE]... [--exclude NODE]... [--partial]",
    """
Moves the whole cluster to the newest build of cluster.yml's image as one: pulls it on every
node while the old build serves, switches, then checks every node runs it, one real completion
and the benchmark against the old build's; on a failure every node goes back to the old build.
The lock (halo-cluster.lock in the state folder, .halo-cluster/ beside cluster.yml) records
both builds. Every node must run one image, so a --limit or --exclude that leaves a node out is
refused: bring the node back first.

With --os: a new kernel and/or firmware, the workers first and the head last, each node booting
the new kernel once before it keeps it; a node whose check after the boot fails is rebooted
into its old kernel and the upgrade stops there. A kernel is each node's own: with --limit or
--exclude leaving nodes out, --partial upgrades only the nodes chosen and names those that stay
on their old kernel; without --partial it refuses.""",
    OPTIONS,
    NAME,
    "halo-cluster upgrade --os --kernel 6.18.9-200.fc43",
    "upgrade --os",
)


def main(argv: list[str]) -> int:
    if "--os" in argv[: argv.index("--") if "--" in argv else len(argv)]:
        from halo_cluster.tools.upgrading import osmain

        return osmain.main(argv)
    from halo_cluster.tools.upgrading import imagemain

    return imagemain.main_upgrade(argv)
