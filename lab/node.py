"""One lab node: an overlay root over the shared root filesystem, booted by systemd-nspawn.

A small supervisor process per node (lab/supervisor.py) runs systemd-nspawn and boots it again
when the node reboots itself (nspawn exits 133), like a machine's firmware would.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from lab import hub, sh
from lab.network import netns

CGROUP_PREFIX = "halolab-"
NSPAWN_RUNTIME = Path("/run/systemd/nspawn")


def cgroup_dirs(node: str) -> list[Path]:
    """The node's cgroup folders: named systemd and unified hierarchies, or the v2 root."""
    base = Path("/sys/fs/cgroup")
    roots = [base / h for h in ("systemd", "unified") if (base / h / "cgroup.procs").exists()]
    return [root / f"{CGROUP_PREFIX}{node}" for root in roots or [base]]


def lab_cgroups() -> list[Path]:
    base = Path("/sys/fs/cgroup")
    found = list(base.glob(f"{CGROUP_PREFIX}*")) + list(base.glob(f"*/{CGROUP_PREFIX}*"))
    return sorted(p for p in found if p.is_dir())


def cgroup_pids(group: Path) -> list[int]:
    pids = []
    for procs in group.rglob("cgroup.procs"):
        try:
            pids += [int(p) for p in procs.read_text().split()]
        except OSError:
            continue
    return pids


@dataclass(frozen=True)
class NodeDirs:
    root: Path  # .lab/nodes/NAME

    @property
    def merged(self) -> Path:
        return self.root / "merged"

    @property
    def stop_file(self) -> Path:
        return self.root / "stop"

    @property
    def boots_file(self) -> Path:
        return self.root / "boots"

    @property
    def supervisor_pid(self) -> Path:
        return self.root / "supervisor.pid"

    @property
    def nspawn_pid(self) -> Path:
        return self.root / "nspawn.pid"

    def boots(self) -> int:
        try:
            return int(self.boots_file.read_text())
        except (OSError, ValueError):
            return 0


def mount_root(dirs: NodeDirs, lowers: list[Path]) -> None:
    """The node's root: an overlay of its own upper folder over `lowers` (top first: a restored
    snapshot's layers, then the cached root filesystem)."""
    for sub in ("upper", "work", "merged", "containers", "home"):
        (dirs.root / sub).mkdir(parents=True, exist_ok=True)
    if not sh.ok("mountpoint", "-q", str(dirs.merged)):
        below = ":".join(map(str, lowers))
        sh.run(
            "mount",
            "-t",
            "overlay",
            "overlay",
            "-o",
            f"lowerdir={below},upperdir={dirs.root / 'upper'},workdir={dirs.root / 'work'}",
            str(dirs.merged),
        )


def prepare(dirs: NodeDirs, name: str, lowers: list[Path], authorized_key: str, user: str) -> str:
    """Mount the overlay root and give the node its identity; return its SSH host key line."""
    mount_root(dirs, lowers)
    merged = dirs.merged
    (merged / "etc/hostname").write_text(f"{name}\n")
    hosts = (merged / "etc/hosts").read_text()
    if f" {name}\n" not in hosts:
        (merged / "etc/hosts").write_text(hosts + f"127.0.1.1 {name}\n")
    if not list((merged / "etc/ssh").glob("ssh_host_ed25519_key")):
        sh.run("chroot", str(merged), "ssh-keygen", "-A")
    ssh_dir = merged / "root/.ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    (ssh_dir / "authorized_keys").write_text(authorized_key)
    (ssh_dir / "authorized_keys").chmod(0o600)
    _prepare_home(dirs, merged, user)
    return " ".join((merged / "etc/ssh/ssh_host_ed25519_key.pub").read_text().split()[:2])


def _prepare_home(dirs: NodeDirs, merged: Path, user: str) -> None:
    """/home is a plain ext4 folder per node: rootless podman cannot store on the overlay."""
    for line in (merged / "etc/passwd").read_text().splitlines():
        fields = line.split(":")
        if fields[0] == user:
            home = dirs.root / "home" / user
            home.mkdir(exist_ok=True)
            uid, gid = int(fields[2]), int(fields[3])
            os.chown(home, uid, gid)
            home.chmod(0o700)
            (home / ".cache").mkdir(exist_ok=True)
            hub.seed(home / ".cache" / "huggingface", uid, gid)
            hub.seed(home / ".cache" / "huggingface", uid, gid, hub.SPARSE)
            os.chown(home / ".cache", uid, gid)


@dataclass(frozen=True)
class Shared:
    """Host folders every node sees: package repository, seed image, registry storage."""

    repo: Path
    image: Path
    registry: Path

    def argv(self) -> list[str]:
        return [str(self.repo), str(self.image), str(self.registry)]


def start(dirs: NodeDirs, name: str, shared: Shared) -> None:
    dirs.stop_file.unlink(missing_ok=True)
    NSPAWN_RUNTIME.mkdir(parents=True, exist_ok=True)
    # /run is on disk here; nspawn refuses to clean its propagate folders off a disk file system.
    if not sh.ok("mountpoint", "-q", str(NSPAWN_RUNTIME)):
        sh.run("mount", "-t", "tmpfs", "halolab", str(NSPAWN_RUNTIME))
    log = (dirs.root / "console.log").open("ab")
    process = subprocess.Popen(
        [sys.executable, "-m", "lab.supervisor", str(dirs.root), name, *shared.argv()],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    dirs.supervisor_pid.write_text(str(process.pid))


def nspawn_argv(dirs: NodeDirs, name: str, shared: Shared) -> list[str]:
    return [
        "systemd-nspawn",
        "--quiet",
        "-D",
        str(dirs.merged),
        "--boot",
        f"--machine={name}",
        "--register=no",
        "--keep-unit",
        "--private-users=no",
        f"--network-namespace-path=/run/netns/{netns(name)}",
        "--capability=all",
        "--system-call-filter=add_key keyctl request_key bpf",
        f"--bind={dirs.root / 'containers'}:/var/lib/containers",
        f"--bind={dirs.root / 'home'}:/home",
        f"--bind-ro={shared.repo}:/srv/halo-lab-repo",
        f"--bind-ro={shared.image}:/srv/halo-lab-image",
        f"--bind={shared.registry}:/var/lib/docker-registry",
        "--console=pipe",
    ]


def is_running(dirs: NodeDirs) -> bool:
    """The node's supervisor is alive (a killed one may linger as a zombie nobody reaps)."""
    try:
        stat = Path(f"/proc/{int(dirs.supervisor_pid.read_text())}/stat").read_text()
    except (OSError, ValueError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def request_stop(dirs: NodeDirs) -> None:
    """Ask for a clean poweroff (SIGTERM to nspawn); the supervisor will not restart it."""
    if dirs.root.exists():
        dirs.stop_file.touch()
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(dirs.nspawn_pid.read_text()), signal.SIGTERM)


def stop(dirs: NodeDirs, name: str, timeout: float = 20.0) -> None:
    """Clean poweroff, for at most `timeout` s, then make sure nothing of the node is left."""
    if dirs.root.exists():
        request_stop(dirs)
        deadline = time.monotonic() + timeout
        while is_running(dirs) and time.monotonic() < deadline:
            time.sleep(0.2)
    for group in cgroup_dirs(name):
        _kill_and_remove(group)
    if dirs.root.exists() and sh.ok("mountpoint", "-q", str(dirs.merged)):
        sh.run("umount", "-l", str(dirs.merged))


def _kill_and_remove(group: Path) -> None:
    for _ in range(50):
        pids = cgroup_pids(group) if group.exists() else []
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    if group.exists():
        for sub in sorted((p for p in group.rglob("*") if p.is_dir()), reverse=True):
            sub.rmdir()
        group.rmdir()
