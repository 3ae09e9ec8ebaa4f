"""Managed files are replaced, never rewritten in place: a new inode after a change, and the old
file whole when the transfer is killed part-way."""

from __future__ import annotations

import os
import subprocess
import threading

import pytest

from halo_cluster.roles.kernel import ENTRIES, GRUB, KERNEL_CMDLINE
from halo_cluster.roles.launcher import ENV_FILE
from lab import cli
from tests.e2e.conftest import PYINFRA, ROOT, Lab

KEYFILE = "/etc/NetworkManager/system-connections/halo-data.nmconnection"
TEMP = "/etc/halo-cluster/.cluster.env.halo-new"


@pytest.fixture
def lab(converged: Lab) -> Lab:
    return converged


def inodes(lab: Lab, node: str) -> dict[str, str]:
    listing = lab.ssh(node, f"stat -c '%n %i' {GRUB} {KERNEL_CMDLINE} {KEYFILE} {ENTRIES}/*.conf")
    return dict(line.split() for line in listing.splitlines())


def test_changed_files_get_a_new_inode_and_no_temporary_file_stays(lab: Lab) -> None:
    before = inodes(lab, "node1")
    changed = lab.config("mtu: 8000\nkernel: {extra_args: [halo.atomic=1]}\n")
    result = lab.deploy(config=changed)
    assert result.returncode == 0, result.stderr[-3000:]
    after = inodes(lab, "node1")
    assert before.keys() == after.keys()
    kept = [path for path in before if before[path] == after[path]]
    assert kept == [], f"rewritten in place: {kept}"
    assert "halo.atomic=1" in lab.ssh("node1", f"cat {KERNEL_CMDLINE}")
    assert "mtu=8000" in lab.ssh("node1", f"cat {KEYFILE}")
    leftovers = lab.ssh("node1", "find /etc /boot -name '*.halo-new'")
    assert leftovers == ""
    assert lab.ssh("node1", f"stat -c '%a %U' {KEYFILE}").strip() == "600 root"


def test_killed_upload_leaves_the_old_file_whole(lab: Lab) -> None:
    old = lab.ssh("node1", f"cat {ENV_FILE}")
    inode = lab.ssh("node1", f"stat -c %i {ENV_FILE}")
    # on the node: once the upload has written 1 MB of the temporary file, kill the SFTP server
    watcher = threading.Thread(
        target=lab.ssh,
        args=(
            "node1",
            f"for i in $(seq 600); do [ $(stat -c %s {TEMP} 2>/dev/null || echo 0) -gt 1000000 ] "
            "&& exec pkill -KILL -x sftp-server; sleep 0.05; done",
        ),
        kwargs={"check": False},
    )
    watcher.start()
    result = subprocess.run(
        [PYINFRA, "-y", "--limit", "node1", "inventory.py", "tests/e2e/deploys/large_upload.py"],
        cwd=ROOT,
        env={**os.environ, "CLUSTER_CONFIG": str(cli.CONFIG)},
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )
    watcher.join(timeout=60)
    assert result.returncode != 0, "the upload was not interrupted"
    partial = int(lab.ssh("node1", f"stat -c %s {TEMP}"))
    assert 1_000_000 < partial < len("# filler line of the upload test\n") * 2_500_000
    assert lab.ssh("node1", f"cat {ENV_FILE}") == old
    assert lab.ssh("node1", f"stat -c %i {ENV_FILE}") == inode
    lab.ssh("node1", f"rm -f {TEMP}")
