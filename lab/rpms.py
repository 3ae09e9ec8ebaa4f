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
from lab import debs, sh, signing
from lab.releases import Release

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

# a package the lab leaves unsigned in a signed release's repository: a node must refuse it
UNSIGNED = "halo-lab-unsigned"
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


# Fedora's node-exporter with real software: Debian's node_exporter binary in Fedora's layout
# (node-exporter.spec: the binary, its node_exporter link, the unit and its node_exporter alias,
# the options file, the `prometheus` system user by sysusers.d), so the metrics role's drop-in and
# unit name meet what a Fedora node has. The unit's ExecStart variable is Debian's (Fedora's own
# was not seen): the role's drop-in replaces ExecStart whatever it is.
EXPORTER = "node-exporter"
EXPORTER_SPEC = """\
Name: node-exporter
Version: {version}
Release: 1.lab
Summary: halo-cluster lab stand-in for node-exporter: Debian's {debian}
License: Apache-2.0
BuildArch: x86_64
AutoReqProv: no
%global debug_package %{{nil}}
%global __os_install_post %{{nil}}

%description
Lab stand-in: Debian's {debian} binary under Fedora's package name and
file layout.

%install
mkdir -p %{{buildroot}}/usr/bin %{{buildroot}}/usr/lib/systemd/system %{{buildroot}}/etc/default
mkdir -p %{{buildroot}}/usr/lib/sysusers.d %{{buildroot}}/var/lib/prometheus/node-exporter
install -m 0755 {root}/usr/bin/prometheus-node-exporter %{{buildroot}}/usr/bin/
ln -s prometheus-node-exporter %{{buildroot}}/usr/bin/node_exporter
cat > %{{buildroot}}/usr/lib/systemd/system/prometheus-node-exporter.service <<'UNIT'
[Unit]
Description=Prometheus exporter for machine metrics
After=network.target

[Service]
User=prometheus
EnvironmentFile=-/etc/default/prometheus-node-exporter
ExecStart=/usr/bin/prometheus-node-exporter $ARGS
Restart=on-failure

[Install]
WantedBy=multi-user.target
UNIT
ln -s prometheus-node-exporter.service %{{buildroot}}/usr/lib/systemd/system/node_exporter.service
echo 'ARGS=""' > %{{buildroot}}/etc/default/prometheus-node-exporter
echo 'u prometheus - "Prometheus" /var/lib/prometheus' \\
    > %{{buildroot}}/usr/lib/sysusers.d/node-exporter.conf

%post -p <lua>
rpm.execute("/usr/bin/systemd-sysusers", "/usr/lib/sysusers.d/node-exporter.conf")

%files
/usr/bin/prometheus-node-exporter
/usr/bin/node_exporter
/usr/lib/systemd/system/prometheus-node-exporter.service
/usr/lib/systemd/system/node_exporter.service
%config(noreplace) /etc/default/prometheus-node-exporter
/usr/lib/sysusers.d/node-exporter.conf
%dir /var/lib/prometheus/node-exporter
"""


def exporter_spec() -> str:
    package = "prometheus-node-exporter"
    debian = debs.version(package)
    version = debian.split("-")[0].split("+")[0].split(":")[-1]
    return EXPORTER_SPEC.format(
        version=version, debian=f"{package} {debian}", root=debs.extracted(package)
    )


def specs(fedora: Release) -> dict[str, str]:
    """Every stand-in's spec by a file name of its own: `fedora`'s kernels and firmware."""
    found = {name: SPEC.format(name=name) for name in STAND_INS}
    found[EXPORTER] = exporter_spec()
    for evr in fedora.kernels:
        version, release = evr.split("-")
        found[f"kernel-core-{evr}"] = KERNEL_SPEC.format(
            version=version, release=release, install=KERNEL_INSTALL
        )
    for evr in fedora.firmwares:
        version, release = evr.split("-")
        for name in FIRMWARE_PACKAGES:
            found[f"{name}-{evr}"] = FIRMWARE_SPEC.format(
                name=name, version=version, release=release
            )
    return found


def rpmbuild(work: Path, staging: Path) -> tuple[str, ...]:
    """rpmbuild's command line up to the spec: build in `work`, the RPM into `staging`."""
    return (
        "rpmbuild",
        "-bb",
        "--quiet",
        "--define",
        f"_topdir {work / 'build'}",
        "--define",
        f"_rpmdir {staging}",
        "--define",
        "_build_name_fmt %{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}.rpm",
    )


def build_repo(repo: Path, release: Release) -> None:
    """Build every stand-in RPM of `release` and the repository metadata into `repo`, each RPM
    signed with the lab's key when the release enforces signatures (lab/signing.py), and beside
    them one left unsigned, which such a node refuses."""
    work = Path(tempfile.mkdtemp(prefix="halo-lab-rpm-"))
    try:
        staging = work / "repo"
        staging.mkdir()
        for name, text in specs(release).items():
            spec = work / f"{name}.spec"
            spec.write_text(text)
            sh.run(*rpmbuild(work, staging), str(spec))
        if release.signed:
            signing.sign(sorted(staging.glob("*.rpm")))
            unsigned = work / f"{UNSIGNED}.spec"
            unsigned.write_text(SPEC.format(name=UNSIGNED))
            sh.run(*rpmbuild(work, staging), str(unsigned))
            signing.export_key(staging / signing.KEY_FILE)
        sh.run("createrepo_c", "--quiet", str(staging))
        shutil.rmtree(repo, ignore_errors=True)
        repo.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(staging, repo)
    finally:
        shutil.rmtree(work, ignore_errors=True)
