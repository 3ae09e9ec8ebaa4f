"""Small stand-in RPMs for the lab's dnf repository.

They carry the real package names so that the deploy's `dnf install` runs unchanged; each says in
its description that it is a lab stand-in. The real tools (podman, ethtool, ...) come from the
node's Debian root; RDMA tools have no stand-in binaries because the lab has no RDMA device.

Beside them, the kernel and amdgpu firmware as Fedora 43 versions them, so that `rpm -q` and dnf
tell the truth about a node's kernel: a stand-in kernel-core's scriptlets write and remove its
BLS entry through the lab's kernel-install (lab/rootfs/usr/local/libexec/lab-kernel-install),
and the firmware set requires linux-firmware-whence of its own version, as Fedora's does.
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

# the versions docs/design/day-after.md section 7 names: what a node starts with (lab/rootfs.py
# installs them) and what its repository offers beside
KERNELS = ("6.18.5-200.fc43", "6.18.6-200.fc43", "6.18.9-200.fc43", "6.18.16-200.fc43")
FIRMWARES = ("20251111-1.fc43", "20251125-1.fc43", "20260110-1.fc43")
FIRMWARE_PACKAGES = ("amd-gpu-firmware", "linux-firmware", "linux-firmware-whence")
KERNEL_INSTALL = "/usr/local/libexec/lab-kernel-install"

KERNEL_SPEC = """\
Name: kernel-core
Version: {version}
Release: {release}
Summary: halo-cluster lab stand-in for kernel-core {version}-{release}
License: MIT
BuildArch: x86_64
Provides: installonlypkg(kernel)

%description
Lab stand-in: no kernel. Installing it writes its BLS entry as kernel-install does, and makes it
the default boot entry; removing it removes the entry. Its scriptlets are rpm's built-in Lua:
nothing in the lab's rpm database provides /bin/sh.

%posttrans -p <lua>
rpm.execute("{install}", "add", "{version}-{release}.x86_64")

%postun -p <lua>
rpm.execute("{install}", "remove", "{version}-{release}.x86_64")

%files
"""

FIRMWARE_SPEC = """\
Name: {name}
Version: {version}
Release: {release}
Summary: halo-cluster lab stand-in for {name} {version}-{release}
License: MIT
BuildArch: noarch
Requires: linux-firmware-whence = %{{version}}-%{{release}}

%description
Lab stand-in: no firmware, only the version Fedora's package carries.

%files
"""


def specs() -> dict[str, str]:
    """Every stand-in's spec by a file name of its own."""
    found = {name: SPEC.format(name=name) for name in STAND_INS}
    for evr in KERNELS:
        version, release = evr.split("-")
        found[f"kernel-core-{evr}"] = KERNEL_SPEC.format(
            version=version, release=release, install=KERNEL_INSTALL
        )
    for evr in FIRMWARES:
        version, release = evr.split("-")
        for name in FIRMWARE_PACKAGES:
            found[f"{name}-{evr}"] = FIRMWARE_SPEC.format(
                name=name, version=version, release=release
            )
    return found


def build_repo(repo: Path) -> None:
    """Build every stand-in RPM and the repository metadata into `repo`."""
    work = Path(tempfile.mkdtemp(prefix="halo-lab-rpm-"))
    try:
        staging = work / "repo"
        staging.mkdir()
        for name, text in specs().items():
            spec = work / f"{name}.spec"
            spec.write_text(text)
            sh.run(
                "rpmbuild",
                "-bb",
                "--quiet",
                "--define",
                f"_topdir {work / 'build'}",
                "--define",
                f"_rpmdir {staging}",
                "--define",
                "_build_name_fmt %{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}.rpm",
                str(spec),
            )
        sh.run("createrepo_c", "--quiet", str(staging))
        shutil.rmtree(repo, ignore_errors=True)
        repo.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(staging, repo)
    finally:
        shutil.rmtree(work, ignore_errors=True)
