"""Small stand-in RPMs for the lab's dnf repository.

They carry the real package names so that the deploy's `dnf install` runs unchanged; each says in
its description that it is a lab stand-in. The real tools (podman, ethtool, ...) come from the
node's Debian root; RDMA tools have no stand-in binaries because the lab has no RDMA device.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from halo_cluster.roles import all_packages
from lab import sh

# one per package a role declares: adding a role never means editing the lab
STAND_INS = all_packages()

SPEC = """\
Name: {name}
Version: 0.lab
Release: 1
Summary: halo-cluster lab stand-in for {name}
License: MIT
BuildArch: noarch

%description
Lab stand-in: an empty package named {name}, built by the halo-cluster lab so that dnf can
install it on a simulated node. It contains no software.

%files
"""


def build_repo(repo: Path) -> None:
    """Build every stand-in RPM and the repository metadata into `repo`."""
    work = Path(tempfile.mkdtemp(prefix="halo-lab-rpm-"))
    try:
        staging = work / "repo"
        staging.mkdir()
        for name in STAND_INS:
            spec = work / f"{name}.spec"
            spec.write_text(SPEC.format(name=name))
            sh.run(
                "rpmbuild",
                "-bb",
                "--quiet",
                "--define",
                f"_topdir {work / 'build'}",
                "--define",
                f"_rpmdir {staging}",
                "--define",
                "_build_name_fmt %{NAME}.rpm",
                str(spec),
            )
        sh.run("createrepo_c", "--quiet", str(staging))
        shutil.rmtree(repo, ignore_errors=True)
        repo.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(staging, repo)
    finally:
        shutil.rmtree(work, ignore_errors=True)
