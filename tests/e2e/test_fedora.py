"""A Fedora 45 lab (lab/releases.py) through the real dnf5: its RPMs signed and an unsigned one
refused, the os role's locks in versionlock.toml, a locked kernel kept through dnf5's
install-only rotation (dnf5#2368, #2127), and `halo-cluster upgrade --os` to a newer kernel and
back to no lock, with the user's dnf.conf as it was."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from halo_cluster.roles.os import installonly
from lab import releases
from tests.e2e.conftest import ROOT, Lab, failure, summary, verify
from tests.infra import autoupdate
from tests.recorded import fixture

pytestmark = pytest.mark.last  # a lab of another release, after the 2-node tests

HALO_CLUSTER = str(Path(sys.executable).parent / "halo-cluster")
F45 = releases.RELEASES[45]
OLD, RUNNING = F45.installed  # as the root filesystem installs them: the last one boots
BAD, NEWER = F45.offered
LOCKED = "reboot: if-needed\nos:\n  lock: true\n"
REPO = "/srv/halo-lab-repo"


def status(lab: Lab, node: str, command: str) -> tuple[int, str]:
    out = lab.ssh(node, f"{command} 2>&1; echo rc=$?", check=False).rstrip().splitlines()
    return int(out[-1].removeprefix("rc=")), "\n".join(out[:-1])


def kernels(lab: Lab, node: str) -> set[str]:
    return set(lab.ssh(node, "rpm -q --qf '%{EVR}\\n' kernel-core").split())


def upgrade_os(config: Path, kernel: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, CLUSTER_CONFIG=str(config))
    argv = [HALO_CLUSTER, "upgrade", "--os", "--kernel", kernel]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def nothing_behind_the_lock(lab: Lab, locked: Path) -> None:
    """verify's check with the lock on: neither PackageKit nor dnf5 automatic in the lab, then
    the trigger PackageKit's offline update leaves (a WARN, the run still passes), removed at once:
    it would make the next boot an offline update."""
    check = "nothing_upgrades_behind_the_lock"
    found = verify("-k", check, config=locked)
    assert found.returncode == 0, found.stdout[-3000:]
    assert [summary(found)[(node, check)] for node in lab.nodes] == ["passed"] * len(lab.nodes)
    assert "PackageKit not installed; no offline update waiting; dnf5-automatic not installed" in (
        found.stdout
    )
    lab.ssh("node1", f"ln -s {autoupdate.PACKAGEKIT_PREPARED[0]} /system-update")
    try:
        found = verify("-k", check, config=locked)
    finally:
        lab.ssh("node1", "rm -f /system-update")
    assert found.returncode == 0, found.stdout[-3000:]
    rows = summary(found)
    assert (rows[("node1", check)], rows[("node2", check)]) == ("WARN", "passed"), rows
    assert "fix: pkcon offline-cancel" in (ROOT / "reports" / "verify-lab.xml").read_text()


def test_fedora_45_through_real_dnf5() -> None:
    lab = Lab(2, "roce", fedora=45).fresh()
    assert "VERSION_ID=45\n" in lab.ssh("node1", "cat /etc/os-release")
    assert lab.ssh("node1", "dnf --version").startswith("dnf5 version 5.")
    assert lab.ssh("node1", f"ls {releases.DNF5_REPOS}").split() == ["halo-lab.repo"]
    code, out = status(lab, "node1", "dnf -y install halo-lab-unsigned")
    assert code != 0 and "The package is not signed" in out, out

    locked = lab.config(LOCKED)
    result = lab.deploy(config=locked)
    assert result.returncode == 0, failure(result)
    for node in lab.nodes:
        assert f'value = "{RUNNING}"' in lab.ssh(node, "cat /etc/dnf/versionlock.toml")
        assert installonly.UNLIMITED in lab.ssh(node, f"cat {installonly.DNF_CONF}").splitlines()
    nothing_behind_the_lock(lab, locked)

    # what PackageKit does behind the lock (PackageKit#677): two more kernels, four in all, one
    # over Fedora's installonly_limit; dnf5 would rotate one out in the next transaction
    extra = " ".join(f"{REPO}/kernel-core-{k}.x86_64.rpm" for k in (BAD, NEWER))
    lab.ssh("node1", f"rpm -i --oldpackage {extra}")
    code, out = status(lab, "node1", "dnf --assumeno --setopt=installonly_limit=3 install ethtool")
    assert f"kernel-core x86_64 0:{BAD}" in out, out  # the rotation, with Fedora's own limit
    lab.ssh("node1", "dnf -y -q upgrade && dnf -y -q install ethtool")
    assert kernels(lab, "node1") == {OLD, RUNNING, BAD, NEWER}
    assert lab.ssh("node1", "uname -r").strip() == f"{RUNNING}.x86_64"
    lab.ssh("node1", f"rpm -e kernel-core-{BAD} kernel-core-{NEWER}")
    lab.boot_packaged_kernel("node1", f"{RUNNING}.x86_64")

    result = upgrade_os(locked, NEWER)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    for node in lab.nodes:
        assert lab.ssh(node, "uname -r").strip() == f"{NEWER}.x86_64"
        toml = lab.ssh(node, "cat /etc/dnf/versionlock.toml")
        assert f'value = "{NEWER}"' in toml and f'value = "{RUNNING}"' not in toml

    result = lab.deploy(config=lab.config("reboot: if-needed\n"))
    assert result.returncode == 0, failure(result)
    for node in lab.nodes:  # the lock gone: the user's dnf.conf as the release shipped it
        assert lab.ssh(node, f"cat {installonly.DNF_CONF}") == fixture("dnf-conf-fedora.conf")
