"""`halo-cluster upgrade [--os]`: the image's new build on every node, or with `--os` a new
kernel and firmware (halo_cluster/tools/upgrade.py, upgrade_os.py)."""

from __future__ import annotations

from halo_cluster.tools.commands import text

NAME = "upgrade"
SUMMARY = "every node to the image's new build (pull, switch, gate); --os: kernel and firmware"
OPTIONS = (
    ("--image REF", "the image to move to; it must be cluster.yml's `image:`"),
    ("--retry", "admit a build an earlier upgrade rejected"),
    ("--no-bench", "skip the bench gate this once"),
    ("--json", "the result as one JSON document on stdout (the progress on stderr)"),
    ("--os", "upgrade the kernel and firmware instead (with --kernel, --firmware)"),
    ("--kernel VERSION", "with --os: the kernel-core version, as 6.18.9-200.fc43"),
    ("--firmware VERSION", "with --os: the amd-gpu-firmware version, as 20260110-1.fc43"),
)
HELP = text.page(
    "halo-cluster upgrade [--image REF] [--retry] [--no-bench] [--json]\n"
    "       halo-cluster upgrade --os [--kernel VERSION] [--firmware VERSION]",
    """
Moves the whole cluster to the newest build of cluster.yml's image as one: pulls it on every
node while the old build serves, switches, then checks every node runs it, one real completion
and the benchmark against the old build's; on a failure every node goes back to the old build.
The lock (halo-cluster.lock, beside cluster.yml) records both builds.

With --os: a new kernel and/or firmware, the workers first and the head last, each node booting
the new kernel once before it keeps it; a node whose check after the boot fails is rebooted
into its old kernel and the upgrade stops there.""",
    OPTIONS,
    NAME,
    "halo-cluster upgrade --os --kernel 6.18.9-200.fc43",
    "upgrade --os",
)


def main(argv: list[str]) -> int:
    if "--os" in argv[: argv.index("--") if "--" in argv else len(argv)]:
        from halo_cluster.tools import upgrade_os

        return upgrade_os.main(argv)
    from halo_cluster.tools import upgrade

    return upgrade.main_upgrade(argv)
