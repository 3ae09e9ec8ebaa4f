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
from lab import sh
from lab.places import CACHE, SUITE, apt_mirror, folder_digest
from lab.rpms import FIRMWARE_PACKAGES, build_repo

OVERLAY_FILES = Path(__file__).resolve().parent / "rootfs"
LAB_USER = "vllm"
PACKAGES = (
    # a booting, reachable node
    "systemd systemd-sysv dbus udev openssh-server openssh-client sudo procps kmod less "
    # the parts the deploy drives: NetworkManager, dnf/rpm, iproute2, ethtool
    "network-manager iproute2 iputils-ping ethtool python3 dnf rpm curl firewalld rsync "
    # rootless podman and toolbox for the cluster user
    "podman crun nftables uidmap passt catatonit podman-toolbox libpam-systemd skopeo "
    # dnf 4's versionlock plugin: the command lines of Fedora 43's dnf5 versionlock (os.lock)
    "dnf-plugins-core "
    "dbus-user-session systemd-container libcap2-bin "
    # the lab's image registry
    "docker-registry"
).split()
# Fedora 43 kernels the seed guide verified, installed in this order from the stand-in RPMs: the
# second becomes the default boot entry, as kernel-install makes the newest one; the firmware
# set a node starts with (docs/design/day-after.md section 7)
KERNELS = ("6.18.5-200.fc43", "6.18.6-200.fc43")
FIRMWARE = "20251111-1.fc43"
MACHINE_ID = "5e0d1c3b2a4f48e6b7c8d9e0f1a2b3c4"  # lab/rootfs/etc/kernel/entry-token
ROOT_UUID = "7138d111-30d8-4fe0-af64-0d8cf3b01c3c"
BLS_OPTIONS = f"root=UUID={ROOT_UUID} ro rootflags=subvol=root rhgb quiet"


def recipe_hash() -> str:
    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(" ".join(PACKAGES).encode())
    # the stand-in RPMs: one per package a role declares
    digest.update(" ".join(all_packages()).encode())
    digest.update((Path(__file__).parent / "rpms.py").read_bytes())
    folder_digest(digest, OVERLAY_FILES)
    return digest.hexdigest()[:12]


def rootfs_path() -> Path:
    return CACHE / f"rootfs-{recipe_hash()}"


def ensure_rootfs() -> Path:
    """Return the cached root filesystem, building it first when the recipe changed."""
    target = rootfs_path()
    if (target / ".complete").exists():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    # an older recipe's root and repository go: only one recipe is cached
    for stale in (*CACHE.glob("rootfs-*"), *CACHE.glob("repo-*")):
        if not stale.name.endswith(recipe_hash()) and not _in_use(stale):
            shutil.rmtree(stale, ignore_errors=True)
    build = Path(tempfile.mkdtemp(prefix="build-", dir=CACHE))
    print(f"lab: building the root filesystem ({SUITE}, once; cached in {target})", flush=True)
    try:
        sh.run(
            "mmdebstrap",
            "--quiet",
            "--variant=minbase",
            f"--include={','.join(PACKAGES)}",
            SUITE,
            str(build),
            apt_mirror(),
        )
        _customize(build)
        (build / ".complete").touch()
        shutil.rmtree(target, ignore_errors=True)
        build.rename(target)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return target


def _in_use(path: Path) -> bool:
    return str(path) in Path("/proc/self/mountinfo").read_text()


def _customize(root: Path) -> None:
    shutil.copytree(OVERLAY_FILES, root, dirs_exist_ok=True, symlinks=True)
    (root / "etc/os-release").unlink(missing_ok=True)
    shutil.copy(root / "usr/lib/os-release", root / "etc/os-release")
    (root / "etc/machine-id").write_text("")  # systemd makes a transient one per node and boot
    for folder in ("usr/local/libexec", "usr/local/sbin", "usr/local/bin"):
        for script in (root / folder).iterdir():
            script.chmod(0o755)
    chroot = ("chroot", str(root))
    _install_kernels_and_firmware(root)
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


def _install_kernels_and_firmware(root: Path) -> None:
    """The stand-in kernels and firmware through dnf, so that rpm knows them: each kernel's
    scriptlet writes its BLS entry with the options a Fedora install has (the entries come
    from the packages, as on Fedora). The repository is copied in for the build only (a node
    has it bind-mounted there); /etc/kernel/cmdline is the deploy's to write."""
    repo = root / "srv/halo-lab-repo"
    shutil.copytree(ensure_repo(), repo, dirs_exist_ok=True)
    cmdline = root / "etc/kernel/cmdline"
    cmdline.write_text(f"{BLS_OPTIONS}\n")
    dnf = ("chroot", str(root), "dnf", "--quiet", "--assumeyes", "--releasever=43", "install")
    try:
        for version in KERNELS:  # one at a time: the last one installed becomes the default
            sh.run(*dnf, f"kernel-core-{version}")
        sh.run(*dnf, *(f"{name}-{FIRMWARE}" for name in FIRMWARE_PACKAGES))
        sh.run("chroot", str(root), "dnf", "--quiet", "clean", "all")
    finally:
        cmdline.unlink(missing_ok=True)
        shutil.rmtree(repo, ignore_errors=True)
        repo.mkdir(parents=True)


def registry_storage(root: Path, image_key: str) -> Path:
    """The registry's storage, shared by every node, owned by the node's docker-registry user;
    one per root filesystem and image (the registry is seeded with the image)."""
    for stale in CACHE.glob("registry-*"):
        if stale.name != f"registry-{recipe_hash()}-{image_key}" and not _in_use(stale):
            shutil.rmtree(stale, ignore_errors=True)
    storage = CACHE / f"registry-{recipe_hash()}-{image_key}"
    storage.mkdir(parents=True, exist_ok=True)
    for line in (root / "etc/passwd").read_text().splitlines():
        fields = line.split(":")
        if fields[0] == "docker-registry":
            os.chown(storage, int(fields[2]), int(fields[3]))
    return storage


def ensure_repo() -> Path:
    """A dnf repository of small stand-in RPMs (cached beside the root filesystem)."""
    repo = CACHE / f"repo-{recipe_hash()}"
    if not (repo / "repodata/repomd.xml").exists():
        build_repo(repo)
    return repo
