"""The lab's shared root filesystem: Debian trixie made Fedora-shaped, built once and cached.

The cache key is a hash of this recipe (packages plus the files in lab/rootfs/), so changing the
recipe rebuilds it. Nodes mount it read-only as the lower layer of their overlay root.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from halo_cluster.roles import all_packages
from lab import sh, signing
from lab.places import CACHE, apt_mirror, folder_digest
from lab.releases import OLD_REPOS, Release
from lab.rpms import FIRMWARE_PACKAGES, build_repo

OVERLAY_FILES = Path(__file__).resolve().parent / "rootfs"
LAB_USER = "vllm"
PACKAGES = (
    # a booting, reachable node
    "systemd systemd-sysv dbus udev openssh-server openssh-client sudo procps kmod less "
    # the parts the deploy drives: NetworkManager, dnf/rpm, iproute2, ethtool
    "network-manager iproute2 iputils-ping ethtool python3 rpm curl firewalld rsync "
    # rootless podman and toolbox for the cluster user
    "podman crun nftables uidmap passt catatonit podman-toolbox libpam-systemd skopeo "
    "dbus-user-session systemd-container libcap2-bin "
    # the lab's image registry
    "docker-registry"
).split()
# dnf 4 and its versionlock plugin (the command lines of dnf5's versionlock, os.lock), or dnf5
DNF4 = ("dnf", "dnf-plugins-core")
DNF5 = ("dnf5",)
MACHINE_ID = "5e0d1c3b2a4f48e6b7c8d9e0f1a2b3c4"  # lab/rootfs/etc/kernel/entry-token
ROOT_UUID = "7138d111-30d8-4fe0-af64-0d8cf3b01c3c"
BLS_OPTIONS = f"root=UUID={ROOT_UUID} ro rootflags=subvol=root rhgb quiet"


def packages(release: Release) -> list[str]:
    return [*PACKAGES, *(DNF5 if release.dnf5 else DNF4)]


def recipe_hash(release: Release) -> str:
    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(repr(release).encode())
    digest.update(" ".join(packages(release)).encode())
    # the stand-in RPMs: one per package a role declares
    digest.update(" ".join(all_packages()).encode())
    for module in ("rpms.py", "releases.py", "signing.py"):
        digest.update((Path(__file__).parent / module).read_bytes())
    folder_digest(digest, OVERLAY_FILES)
    return digest.hexdigest()[:12]


def rootfs_path(release: Release) -> Path:
    return CACHE / f"rootfs-{release.tag}-{recipe_hash(release)}"


def ensure_rootfs(release: Release) -> Path:
    """Return `release`'s cached root filesystem, building it first when the recipe changed."""
    target = rootfs_path(release)
    if (target / ".complete").exists():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    # an older recipe's root and repository go: one recipe is cached per release
    for stale in (*CACHE.glob(f"rootfs-{release.tag}-*"), *CACHE.glob(f"repo-{release.tag}-*")):
        if not stale.name.endswith(recipe_hash(release)) and not _in_use(stale):
            shutil.rmtree(stale, ignore_errors=True)
    build = Path(tempfile.mkdtemp(prefix="build-", dir=CACHE))
    print(
        f"lab: building Fedora {release.version}'s root filesystem ({release.suite}, once; "
        f"cached in {target})",
        flush=True,
    )
    try:
        sh.run(
            "mmdebstrap",
            "--quiet",
            "--variant=minbase",
            # a suite still in development may carry a Release file past its Valid-Until
            '--aptopt=Acquire::Check-Valid-Until "false"',
            f"--include={','.join(packages(release))}",
            release.suite,
            str(build),
            apt_mirror(),
        )
        _customize(build, release)
        (build / ".complete").touch()
        shutil.rmtree(target, ignore_errors=True)
        build.rename(target)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return target


def _in_use(path: Path) -> bool:
    return str(path) in Path("/proc/self/mountinfo").read_text()


def _customize(root: Path, release: Release) -> None:
    shutil.copytree(OVERLAY_FILES, root, dirs_exist_ok=True, symlinks=True)
    (root / "usr/lib/os-release").write_text(release.os_release())
    (root / "etc/os-release").unlink(missing_ok=True)
    shutil.copy(root / "usr/lib/os-release", root / "etc/os-release")
    _dnf_layout(root, release)
    (root / "etc/machine-id").write_text("")  # systemd makes a transient one per node and boot
    for folder in ("usr/local/libexec", "usr/local/sbin", "usr/local/bin"):
        for script in (root / folder).iterdir():
            script.chmod(0o755)
    chroot = ("chroot", str(root))
    _install_kernels_and_firmware(root, release)
    sh.run(*chroot, "passwd", "-d", "root")
    # The cluster user; its home lives on the node's own /home (see lab.node.prepare).
    sh.run(
        *chroot, "useradd", "--no-create-home", "--uid", "1000", "--shell", "/bin/bash", LAB_USER
    )
    sh.run(
        *chroot,
        "usermod",
        "--add-subuids",
        "100000-165535",
        "--add-subgids",
        "100000-165535",
        LAB_USER,
    )
    sh.run(*chroot, "systemctl", "enable", "lab-bootloader.service", "lab-run-host.service")
    sh.run(
        *chroot,
        "systemctl",
        "mask",
        "NetworkManager-wait-online.service",
        "systemd-networkd-wait-online.service",
        "e2scrub_reap.service",
        "apt-daily.timer",
        "apt-daily-upgrade.timer",
        "dpkg-db-backup.timer",
        "fstrim.timer",
    )
    # Every node regenerates its own host keys; none may ship in the shared layer.
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()


REPO_FILE = "halo-lab.repo"
REPO = """\
# The lab's only package repository: stand-in RPMs built by the lab (see docs/lab.md).
[halo-lab]
name=halo-cluster lab stand-ins
baseurl=file:///srv/halo-lab-repo
enabled=1
metadata_expire=0
"""
UNSIGNED_REPO = "gpgcheck=0\n"
SIGNED_REPO = f"gpgcheck=1\ngpgkey=file:///srv/halo-lab-repo/{signing.KEY_FILE}\n"
# rpm itself refuses a package without a valid signature, as Fedora 45's rpm does
ENFORCE = "%_pkgverify_level signature\n"


def _dnf_layout(root: Path, release: Release) -> None:
    """The release's dnf: its repo file where the release keeps them, dnf5 as `dnf` (Fedora's
    dnf5 package has the link), signatures checked and enforced where the release does."""
    repos = root / release.repos_dir.lstrip("/")
    repos.mkdir(parents=True, exist_ok=True)
    # where dnf5 keeps them, /etc/yum.repos.d stays as the admin's override (an empty folder)
    (root / OLD_REPOS.lstrip("/")).mkdir(parents=True, exist_ok=True)
    (repos / REPO_FILE).write_text(REPO + (SIGNED_REPO if release.signed else UNSIGNED_REPO))
    if release.signed:
        (root / "etc/rpm").mkdir(parents=True, exist_ok=True)
        (root / "etc/rpm/macros.halo-lab-verify").write_text(ENFORCE)
    if release.dnf5:
        (root / "usr/bin/dnf").symlink_to("dnf5")
        # Debian's dnf5 turns its local plugin on; Fedora does not ship it (dnf5-plugins), and it
        # would keep every installed package in an unsigned repository of its own
        local = root / "etc/dnf/libdnf5-plugins/local.conf"
        local.write_text("[main]\nname = local\nenabled = 0\n")


def _install_kernels_and_firmware(root: Path, release: Release) -> None:
    """The stand-in kernels and firmware through dnf, so that rpm knows them: each kernel's
    scriptlet writes its BLS entry with the options a Fedora install has (the entries come
    from the packages, as on Fedora). The repository is copied in for the build only (a node
    has it bind-mounted there); /etc/kernel/cmdline is the deploy's to write."""
    repo = root / "srv/halo-lab-repo"
    shutil.copytree(ensure_repo(release), repo, dirs_exist_ok=True)
    cmdline = root / "etc/kernel/cmdline"
    cmdline.write_text(f"{BLS_OPTIONS}\n")
    chroot = ("chroot", str(root))
    if release.signed:
        sh.run(*chroot, "rpm", "--import", f"/srv/halo-lab-repo/{signing.KEY_FILE}")
    dnf = (*chroot, "dnf", "--quiet", "--assumeyes", f"--releasever={release.version}", "install")
    try:
        for version in release.installed:  # one at a time: the last one installed boots
            sh.run(*dnf, f"kernel-core-{version}")
        sh.run(*dnf, *(f"{name}-{release.firmware}" for name in FIRMWARE_PACKAGES))
        sh.run(*chroot, "dnf", "--quiet", "clean", "all")
    finally:
        cmdline.unlink(missing_ok=True)
        shutil.rmtree(repo, ignore_errors=True)
        repo.mkdir(parents=True)


def registry_storage(root: Path, image_key: str, release: Release) -> Path:
    """The registry's storage, shared by every node, owned by the node's docker-registry user;
    one per root filesystem and image (the registry is seeded with the image)."""
    name = f"registry-{release.tag}-{recipe_hash(release)}-{image_key}"
    for stale in CACHE.glob(f"registry-{release.tag}-*"):
        if stale.name != name and not _in_use(stale):
            shutil.rmtree(stale, ignore_errors=True)
    storage = CACHE / name
    storage.mkdir(parents=True, exist_ok=True)
    for line in (root / "etc/passwd").read_text().splitlines():
        fields = line.split(":")
        if fields[0] == "docker-registry":
            os.chown(storage, int(fields[2]), int(fields[3]))
    return storage


def ensure_repo(release: Release) -> Path:
    """A dnf repository of small stand-in RPMs (cached beside the root filesystem)."""
    repo = CACHE / f"repo-{release.tag}-{recipe_hash(release)}"
    if not (repo / "repodata/repomd.xml").exists():
        build_repo(repo, release)
    return repo
