"""Per-node supervisor: boots the node with systemd-nspawn, and again after each reboot.

Run by `lab up` as `python -m lab.supervisor NODE_DIR NAME REPO IMAGE REGISTRY`, detached, output
to the node's console.log. It first moves itself into the node's own cgroup folders: with no
systemd on the host, nspawn (--keep-unit) would otherwise put every node at the cgroup root and
they collide.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from lab.network import reset_data_links
from lab.node import NodeDirs, Shared, cgroup_dirs, nspawn_argv

REBOOT_EXIT = 133  # systemd-nspawn's exit status when the container asked for a reboot


def main(root: str, name: str, *shared_dirs: str) -> int:
    dirs = NodeDirs(Path(root))
    for group in cgroup_dirs(name):
        group.mkdir(parents=True, exist_ok=True)
        (group / "cgroup.procs").write_text(str(os.getpid()))
    env = dict(
        os.environ,
        # with --network-namespace-path nspawn mounts /proc/sys/net read-only; NM needs it
        SYSTEMD_NSPAWN_API_VFS_WRITABLE="network",
        # pure cgroup v2 inside: crun fails on the host's hybrid v1 controllers
        SYSTEMD_NSPAWN_UNIFIED_HIERARCHY="1",
    )
    while True:
        reset_data_links(name)
        dirs.boots_file.write_text(str(dirs.boots() + 1))
        print(f"### boot {dirs.boots()} at {time.strftime('%H:%M:%S')}", flush=True)
        process = subprocess.Popen(
            nspawn_argv(dirs, name, Shared(*map(Path, shared_dirs))), env=env
        )
        dirs.nspawn_pid.write_text(str(process.pid))
        status = process.wait()
        print(f"### systemd-nspawn exited with {status}", flush=True)
        if status != REBOOT_EXIT or dirs.stop_file.exists():
            return status


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
