"""The lab's nodes, network, registry and faults, as `python -m lab` drives them
(lab/command.py, docs/lab.md)."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import time
from pathlib import Path

from halo_cluster.config import lock
from lab import image, network, node, promimage, registry, releases, rootfs, sh, throttle
from lab.places import CACHE, CONFIG, KEY, KNOWN_HOSTS, LAB_DIR, MUX_DIR, PROJECT, STATE
from lab.registry import SEED_NAME
from lab.sh import LabError

MUX_PATH_MAX = 90  # sun_path holds 108 bytes, and ssh binds the path plus a random suffix first
HOST_TOOLS = {  # command -> Debian package
    "systemd-nspawn": "systemd-container",
    "mmdebstrap": "mmdebstrap",
    "rpmbuild": "rpm",
    "rpmsign": "rpm",
    "gpg": "gpg",
    "createrepo_c": "createrepo-c",
    "ip": "iproute2",
    "ssh": "openssh-client",
    "mountpoint": "util-linux",
}
BOOT_TIMEOUT = 90.0
DOWN_TIMEOUT = 5.0  # seconds `lab down` lets all nodes power off cleanly before killing them


def node_dirs(name: str) -> node.NodeDirs:
    return node.NodeDirs(LAB_DIR / "nodes" / name)


def load_state() -> dict:
    try:
        return json.loads(STATE.read_text())
    except (OSError, ValueError):
        return {}


def ensure_host() -> None:
    if platform.system() != "Linux":
        raise LabError("the lab needs Linux (systemd-nspawn, network namespaces, overlayfs)")
    if os.geteuid() != 0:
        raise LabError("the lab needs root: run `sudo make lab-up`")
    missing = sorted({pkg for cmd, pkg in HOST_TOOLS.items() if not shutil.which(cmd)})
    if missing:
        print(f"lab: installing host packages: {' '.join(missing)}", flush=True)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for argv in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *missing]):
            if subprocess.run(argv, env=env, capture_output=True).returncode != 0:
                raise LabError(f"`{' '.join(argv)}` failed; install {' '.join(missing)} by hand")


def ssh_argv(address: str, user: str = "root") -> list[str]:
    return [
        "ssh",
        "-i",
        str(KEY),
        "-o",
        f"UserKnownHostsFile={KNOWN_HOSTS}",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=2",
        "-o",
        "LogLevel=ERROR",
        *shared_connection(address, user),
        f"{user}@{address}",
    ]


def shared_connection(address: str, user: str) -> list[str]:
    """ssh options that share one connection per node and user between commands: a new
    connection costs about 0.17 s, a shared one 0.01 s, and the tests run hundreds. A rebooted
    node closes it; `down` closes every one before the nodes' network goes, so that none is
    left talking to a node that is gone (the keep-alive ends one that is anyway)."""
    path = MUX_DIR / f"{user}@{address}"
    if len(str(path)) > MUX_PATH_MAX:
        return []
    MUX_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)  # ssh fails without it
    return [
        "-o",
        "ControlMaster=auto",
        "-o",
        f"ControlPath={path}",
        "-o",
        "ControlPersist=60",
        "-o",
        "ServerAliveInterval=5",
        "-o",
        "ServerAliveCountMax=6",
    ]


def close_shared_connections() -> None:
    for path in MUX_DIR.glob("*@*"):
        # a master already gone answers at once; one that hangs must not keep the lab up
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run(
                ["ssh", "-o", f"ControlPath={path}", "-O", "exit", "lab-node"],
                capture_output=True,
                timeout=10,
            )
        path.unlink(missing_ok=True)


def node_address(state: dict, name: str) -> str:
    return network.mgmt_addresses(state["nodes"].index(name) + 1)[1]


def wait_booted(state: dict, name: str, timeout: float = BOOT_TIMEOUT) -> float:
    """Wait until the node's systemd reports a finished boot; return the seconds waited."""
    start = time.monotonic()
    argv = [*ssh_argv(node_address(state, name)), "systemctl", "is-system-running", "--wait"]
    while time.monotonic() - start < timeout:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if result.stdout.strip() in ("running", "degraded"):
            return time.monotonic() - start
        if not node.is_running(node_dirs(name)):
            raise LabError(f"{name}: systemd-nspawn exited; see {node_dirs(name).root}/console.log")
        time.sleep(0.2)
    raise LabError(
        f"{name}: not booted after {timeout:.0f} s; see {node_dirs(name).root}/console.log"
    )


def lab_release(state: dict) -> releases.Release:
    """The Fedora release the lab of `state` presents (a lab from before releases: 43)."""
    return releases.release(state.get("fedora"))


def shared_folders(release: releases.Release) -> tuple[Path, node.Shared, Path]:
    """`release`'s cached root filesystem, the folders every node sees, and the Prometheus
    image's tar (each built first when its recipe changed)."""
    ensure_host()
    lower = rootfs.ensure_rootfs(release)
    shared = node.Shared(
        rootfs.ensure_repo(release),
        image.ensure_image(),
        rootfs.registry_storage(lower, image.image_hash(), release),
    )
    prometheus = promimage.ensure(shared.image)  # beside the seed image, which every node mounts
    return lower, shared, prometheus


def boot(state: dict, shared: node.Shared) -> float:
    """Start every node of `state` and wait for each one's finished boot; the seconds taken."""
    started = time.monotonic()
    for name in state["nodes"]:
        node.start(node_dirs(name), name, shared)
    for name in state["nodes"]:
        wait_booted(state, name)
    return time.monotonic() - started


def up(count: int, link: str, release: releases.Release = releases.DEFAULT) -> None:
    ensure_host()
    if is_up(count, link, release):
        print(f"lab: {count} nodes already up ({link}, Fedora {release.version})")
        return
    wanted = node_names(count)
    down(quiet=True)
    lower, shared, prometheus = shared_folders(release)
    KEY.parent.mkdir(parents=True, exist_ok=True)
    if not KEY.exists():
        sh.run(
            "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "halo-cluster-lab", "-f", str(KEY)
        )
    state = {"nodes": wanted, "link": link, "fedora": release.version}
    network.create(wanted, link)
    known_hosts = []
    for name in wanted:
        dirs = node_dirs(name)
        host_key = node.prepare(
            dirs, name, [lower], KEY.with_suffix(".pub").read_text(), rootfs.LAB_USER
        )
        known_hosts.append(f"{node_address(state, name)} {host_key}\n")
    KNOWN_HOSTS.write_text("".join(known_hosts))
    STATE.write_text(json.dumps(state))
    registry.reset_latest(shared)
    seconds = boot(state, shared)
    first = ssh_argv(node_address(state, wanted[0]))
    registry.seed(first, shared)
    registry.tag_example(first, shared)
    registry.seed_prometheus(first, shared, prometheus)
    print(f"lab: {count} nodes up ({link}, Fedora {release.version}) in {seconds:.1f} s")
    write_cluster_config(state)
    print(f"lab: wrote {CONFIG.relative_to(PROJECT) if CONFIG.is_relative_to(PROJECT) else CONFIG}")


BUILDS = LAB_DIR / "builds.json"
PUBLISH = f"""
set -eu
old=$(podman pull --quiet --tls-verify=false {SEED_NAME})
podman rm --force --ignore halo-lab-publish >/dev/null
podman create --quiet --name halo-lab-publish {SEED_NAME} >/dev/null
printf 'Metadata-Version: 2.1\\nName: vllm\\nVersion: %s\\n' "$1" > /tmp/halo-lab-METADATA
podman cp /tmp/halo-lab-METADATA halo-lab-publish:{image.DIST_INFO}/METADATA
podman commit --quiet --change "ENV {image.FAULT_ENV}=$2" halo-lab-publish {SEED_NAME} >/dev/null
podman rm halo-lab-publish >/dev/null
podman push --quiet --tls-verify=false --digestfile /tmp/halo-lab-digest {SEED_NAME} >/dev/null
podman rmi --force {SEED_NAME} "$old" >/dev/null  # root's storage stays empty (test_host.py)
cat /tmp/halo-lab-digest
"""


def publish_image(fault: str = "none") -> str:
    """A new build under the same name: the current `latest` with its stand-in vLLM at another
    version (0.33.0+labN), pushed to the registry storage every node shares, so `latest` moves
    on every node's view at once, as upstream's rebuild under the same tag does. Its digest.
    `fault` (lab/image.py FAULTS): `broken`, a build whose vLLM never serves; `slow`, one whose
    vLLM answers 10 times slower per token; `none`, a good build (also after a faulty one)."""
    if fault not in image.FAULTS:
        raise LabError(f"publish-image: fault {fault!r} is not one of {', '.join(image.FAULTS)}")
    state = load_state()
    builds = json.loads(BUILDS.read_text()) if BUILDS.exists() else []
    version = f"{image.STANDIN_VERSION}+lab{len(builds) + 1}"
    argv = [*ssh_argv(node_address(state, state["nodes"][0])), "sh", "-s", "--", version, fault]
    result = subprocess.run(argv, input=PUBLISH, capture_output=True, text=True)
    if result.returncode != 0:
        raise LabError(f"publish-image failed: {result.stderr.strip()}")
    digest = result.stdout.strip()
    build = {"vllm": version, "digest": digest, "fault": fault}
    BUILDS.write_text(json.dumps([*builds, build], indent=1))
    shown = "" if fault == "none" else f", {fault}"
    print(f"lab: published {SEED_NAME.split('/', 1)[1]} as {digest} (vllm {version}{shown})")
    return digest


def all_running(state: dict) -> bool:
    return all(node.is_running(node_dirs(n)) for n in state.get("nodes", []))


def is_up(count: int, link: str, release: releases.Release = releases.DEFAULT) -> bool:
    """A lab of `count` nodes on `link` presenting `release` runs: `up` keeps it as it is."""
    state = load_state()
    wanted = node_names(count)
    same = state.get("nodes") == wanted and state.get("link") == link
    return same and lab_release(state) == release and all_running(state)


def node_names(count: int) -> list[str]:
    return [f"node{i}" for i in range(1, count + 1)]


def write_cluster_config(state: dict) -> None:
    link = state["link"]
    nodes = state["nodes"]
    subnet = {"roce": "192.168.100.0", "thunderbolt": "192.168.2.0"}[link]
    prefix = 30 if len(nodes) <= 2 else 29 if len(nodes) <= 6 else 24
    lines = [
        "# Written by `make lab-up`: the built-in lab's nodes (see docs/lab.md).",
        f"interconnect: {link}",
        f"subnet: {subnet}/{prefix}",
        f"cluster_user: {rootfs.LAB_USER}",
        "ssh: {user: root, port: 22, key: ssh/id_ed25519, known_hosts: ssh/known_hosts}",
        "nodes:",
    ]
    for name in nodes:
        lines += [
            f"  - name: {name}",
            f"    ssh: {{host: {node_address(state, name)}}}",
            f"    data: {{interface: {network.DATA_INTERFACE[link]}}}",
        ]
    CONFIG.write_text("\n".join(lines) + "\n")


def down(quiet: bool = False, poweroff: float = DOWN_TIMEOUT) -> None:
    """Remove every node, namespace, mount, cgroup folder and process of the lab; idempotent.
    The nodes get `poweroff` seconds to power off cleanly (none: a restore throws them away)."""
    if os.geteuid() != 0:
        raise LabError("the lab needs root: run `sudo make lab-down`")
    names = set(load_state().get("nodes", []))
    names |= (
        {p.name for p in (LAB_DIR / "nodes").glob("*")} if (LAB_DIR / "nodes").exists() else set()
    )
    names |= {g.name.removeprefix(node.CGROUP_PREFIX) for g in node.lab_cgroups()}
    names |= {ns.removeprefix(network.NETNS_PREFIX) for ns in network.lab_namespaces()}
    names.discard(network.SWITCH.removeprefix(network.NETNS_PREFIX))
    # every node powers off at once; a lab being removed need not wait for services to drain
    for name in sorted(names):
        node.request_stop(node_dirs(name))
    close_shared_connections()
    for name in sorted(names):
        node.stop(node_dirs(name), name, timeout=poweroff)
    network.destroy()
    unmount_stale_roots()
    if (LAB_DIR / "nodes").exists():
        remove_in_background(list((LAB_DIR / "nodes").iterdir()))
    # the lock is the cluster's: new nodes are a new cluster (the registry and its builds stay);
    # in the state folder, or beside the config where an older version wrote it
    locks = (lock.path(LAB_DIR), lock.old_path(LAB_DIR))
    for path in (STATE, CONFIG, KNOWN_HOSTS, *locks, LAB_DIR / throttle.RATE_FILE):
        path.unlink(missing_ok=True)
    if sh.ok("mountpoint", "-q", str(node.NSPAWN_RUNTIME)):
        sh.run("umount", str(node.NSPAWN_RUNTIME), check=False)
    if not quiet:
        print(f"lab: down ({len(names)} nodes removed)" if names else "lab: down (nothing was up)")


def remove_in_background(folders: list[Path]) -> None:
    """The removed nodes' folders deleted in the background: a converged node holds about 1 GB
    of podman's storage, 3 s to delete, which no next step waits for (new nodes get new
    folders)."""
    sh.remove_in_background(folders, LAB_DIR, "removing-")


def lab_mounts() -> list[str]:
    """Overlay roots over the lab's cached root filesystem, from any checkout (a session's lab
    left behind in another folder, as CI finds it)."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split(" ")
        if " - overlay " in line and f"lowerdir={CACHE}/" in line:
            found.append(fields[4])
    return found


def unmount_stale_roots() -> None:
    for mountpoint in lab_mounts():
        sh.run("umount", "-l", mountpoint, check=False)


def status() -> int:
    state = load_state()
    if not state:
        print("lab: not up")
        return 0
    restored = f", restored from snapshot {state['snapshot']}" if "snapshot" in state else ""
    print(f"lab: {len(state['nodes'])} nodes, link {state['link']}{restored}, config {CONFIG}")
    for name in state["nodes"]:
        dirs = node_dirs(name)
        address = node_address(state, name)
        if not node.is_running(dirs):
            print(f"  {name:8} {address:12} stopped")
            continue
        probe = subprocess.run(
            [*ssh_argv(address), "systemctl is-system-running; cat /proc/cmdline"],
            capture_output=True,
            text=True,
        )
        lines = probe.stdout.splitlines() or ["unreachable"]
        print(f"  {name:8} {address:12} {lines[0]:10} boots={dirs.boots()}")
        if len(lines) > 1:
            print(f"           cmdline: {lines[1]}")
    return 0


def reboot(name: str) -> None:
    state = load_state()
    if name not in state.get("nodes", []):
        raise LabError(f"no lab node named {name!r} (nodes: {', '.join(state.get('nodes', []))})")
    dirs = node_dirs(name)
    before = dirs.boots()
    subprocess.run(
        [*ssh_argv(node_address(state, name)), "systemctl", "reboot"], capture_output=True
    )
    deadline = time.monotonic() + BOOT_TIMEOUT
    while dirs.boots() == before and time.monotonic() < deadline:
        time.sleep(0.1)
    seconds = wait_booted(state, name)
    print(f"lab: {name} rebooted ({seconds:.1f} s)")


KERNEL_INSTALL = "/usr/local/libexec/lab-kernel-install"  # lab/rootfs, as the RPMs run it
BROKEN_KERNELS = "/etc/lab/broken-kernels"  # read by lab/rootfs/usr/local/libexec/lab-bootloader


def install_kernel(name: str, version: str, options: str | None = None) -> None:
    """Add a newer boot entry as kernel-install would and make it the default."""
    state = load_state()
    argv = [*ssh_argv(node_address(state, name)), KERNEL_INSTALL, "add", version]
    if options:
        argv.append(shlex.quote(options))
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        raise LabError(f"{name}: install-kernel failed: {result.stderr.strip()}")
    print(f"lab: {name}: installed kernel {version} (default entry {result.stdout.strip()})")


def kernel_release(version: str) -> str:
    """VERSION as `uname -r` prints it (the boot loader's list compares entries' versions),
    given as rpm prints it (6.18.16-200.fc43, the issue's and `upgrade --os`'s form) or with
    the arch; one the lab's repository does not offer would silently match nothing."""
    evr = version.removesuffix(".x86_64")
    kernels = lab_release(load_state()).kernels
    if evr not in kernels:
        raise LabError(f"break-kernel {version}: the lab offers the kernels {', '.join(kernels)}")
    return f"{evr}.x86_64"


def break_kernel(version: str, names: list[str] | None = None) -> None:
    """Make booting VERSION fail as a driver regression would: its boot leaves the data link
    down (the lab's boot loader reads the list), on the nodes named (default: every node)."""
    release = kernel_release(version)
    state = load_state()
    interface = network.DATA_INTERFACE[state["link"]]
    for name in names or state["nodes"]:
        line = shlex.quote(f"{release} {interface}")
        script = f"mkdir -p /etc/lab && echo {line} >> {BROKEN_KERNELS}"
        result = subprocess.run(
            [*ssh_argv(node_address(state, name)), script], capture_output=True, text=True
        )
        if result.returncode != 0:
            raise LabError(f"{name}: break-kernel failed: {result.stderr.strip()}")
        print(f"lab: {name}: booting {release} leaves {interface} down")
