"""`python -m lab snapshot NAME` and `python -m lab restore NAME`: the whole lab saved as it
stands and brought back, so that a state many tests start from is deployed once (docs/lab.md,
"Snapshots").

What a snapshot holds, in `/var/cache/halo-cluster-lab/snapshots/NAME/`:
- each node's root as overlayfs layers: the node's upper folder, moved (not copied) into
  `snapshots/layers/` when it is saved, then a lower layer of the node's new root; a node
  restored and saved again adds one layer over the ones it runs on;
- each node's `/var/lib/containers` and `/home`, copied (podman cannot store on an overlay, so
  they are plain folders; this ext4 has no reflinks: `cp -a`, the sparse files kept sparse);
- the controller's side: `.lab/` (config, SSH keys, known_hosts, the lock and the state folder,
  the lab's builds), not its nodes or its SSH sockets;
- the registry's tags and manifests links (`repositories/`); its blobs are named by their
  digests and never rewritten, so they stay where they are, shared;
- the services running on each node when it was saved, which a restore waits for.

The nodes power off cleanly to be saved (a frozen node's files would be a crash's) and boot
again from the saved layers, as after a reboot. A snapshot is keyed by every file that shapes
it (`key`): one saved from other sources is refused, never restored.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from lab import releases, rootfs, sh
from lab.places import CACHE
from lab.sh import LabError

SNAPSHOTS = CACHE / "snapshots"
LAYERS = SNAPSHOTS / "layers"
PROJECT = Path(__file__).resolve().parents[1]
# everything a saved lab's files come from: the tool that deployed it, the lab that made it,
# the pinned Python packages, and the e2e states' own recipes
KEY_SOURCES = (
    "halo_cluster",
    "roles",
    "templates",
    "deploy.py",
    "inventory.py",
    "lab",
    "pyproject.toml",
    "setup.py",
    "constraints.txt",
    "tests/e2e/states.py",
    "tests/e2e/conftest.py",  # Lab.ensure_converged and Lab.config write the states' configs
)
META = "meta.json"
REMOVING = ".removing-"  # what is being deleted, beside the snapshots
RUNS = "removing-"  # a removal of the nodes' folders under way (lab.cli.remove_in_background)
# a restored node's services back within this: Ray's and the stand-in vLLM's start after a boot,
# bounded as the deploy bounds it (lab/serve.yml's serve.ready_timeout)
UNITS_TIMEOUT = float(
    yaml.safe_load((Path(__file__).parent / "serve.yml").read_text())["serve"]["ready_timeout"]
)
# `sc MANAGER ARGS`: systemctl of the system (`system`) or of a lingering user's manager, in
# that user's session as the roles reach it (halo_cluster/node/facts.py as_user)
SYSTEMCTL = (
    'sc() { m=$1; shift; if [ "$m" = system ]; then systemctl "$@"; else '
    'runuser -u "$m" -- env -C / XDG_RUNTIME_DIR=/run/user/$(id -u "$m") systemctl --user "$@"; '
    "fi; }; "
)
# the services a restore waits for: the running ones of every manager that its boot starts
# (enabled, or generated: quadlet's), not one a bus or a socket started on demand (hostnamed,
# polkit: nothing asks for them again) or a login session's
RUNNING = SYSTEMCTL + (
    "for m in system $(ls /var/lib/systemd/linger 2>/dev/null); do "
    "sc $m list-units --type=service --state=running --no-legend --plain 2>/dev/null "
    "| while read -r u _; do "
    'case "$(sc $m show -p UnitFileState --value "$u")" in '
    'enabled|enabled-runtime|generated) echo "$m $u";; esac; done; done'
)


def key() -> str:
    """The digest of every file in KEY_SOURCES (bytecode left out)."""
    digest = hashlib.sha256()
    for source in KEY_SOURCES:
        path = PROJECT / source
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        for file in files:
            if file.is_file() and "__pycache__" not in file.parts:
                digest.update(str(file.relative_to(PROJECT)).encode() + b"\0")
                digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def rootfs_build(lower: Path) -> str:
    """Which build of the root filesystem the layers lie over: a rebuild under the same recipe
    (its cache deleted, the mirror moved on) is another lower, which saved layers do not fit."""
    complete = lower / ".complete"
    return f"{lower.name}@{complete.stat().st_mtime_ns}" if complete.exists() else ""


def folder(name: str) -> Path:
    if not name or "/" in name or name.startswith(".") or name == LAYERS.name:
        raise LabError(f"snapshot name {name!r}: a plain name, not a path")
    return SNAPSHOTS / name


def load(name: str) -> dict:
    """The snapshot's record, refused in one line when it is missing or stale."""
    meta_path = folder(name) / META
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError):
        raise LabError(f"restore {name}: no snapshot of that name ({meta_path})") from None
    if meta.get("key") != key():
        raise LabError(
            f"restore {name}: stale, saved from other sources (key {meta.get('key')}, "
            f"the sources now {key()}): take it again with `python -m lab snapshot {name}`"
        )
    if meta.get("rootfs") != rootfs_build(rootfs.rootfs_path(releases.release(meta.get("fedora")))):
        raise LabError(
            f"restore {name}: stale, saved over another build of the root filesystem "
            f"({meta.get('rootfs')}): take it again with `python -m lab snapshot {name}`"
        )
    missing = [layer for layers in meta["layers"].values() for layer in layers]
    missing = [layer for layer in missing if not (LAYERS / layer).is_dir()]
    if missing:
        raise LabError(f"restore {name}: its layers {', '.join(missing)} are gone: take it again")
    return meta


def fresh(name: str) -> bool:
    """A snapshot of that name exists and its key is the sources' own."""
    try:
        load(name)
    except LabError:
        return False
    return True


def copy(source: Path, target: Path) -> None:
    """`source` as `target`, owners, modes, xattrs (podman's) and holes kept; the layers no
    container writes (`read_only_layers`) hard-linked instead, which costs no bytes."""
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    _copy_tree(source, target, {p for s in storages(source) for p in read_only_layers(s)})


def _copy_tree(source: Path, target: Path, linked: set[Path]) -> None:
    """One `cp` for each part with nothing linked in it, `cp -al` for a linked layer, and a
    folder of its own, its children walked, for each folder above one."""
    if source in linked:
        sh.run("cp", "-al", str(source), str(target))
    elif not any(path.is_relative_to(source) for path in linked):
        sh.run("cp", "-a", "--reflink=auto", "--sparse=always", str(source), str(target))
    else:
        target.mkdir()
        for child in sorted(source.iterdir()):
            _copy_tree(child, target / child.name, linked)
        stat = source.lstat()
        os.chown(target, stat.st_uid, stat.st_gid)
        shutil.copystat(source, target)


def storages(folder: Path) -> list[Path]:
    """podman's storage folders in a node's /home or /var/lib/containers."""
    found = [folder / "storage"] if (folder / "storage" / "overlay").is_dir() else []
    return found + sorted(
        p.parent for p in folder.glob("*/.local/share/containers/storage/overlay")
    )


def read_only_layers(storage: Path) -> list[Path]:
    """The layer folders of a podman storage that nothing writes: every layer its layer store
    lists but a container's own (containers/storage: overlay-layers/layers.json and
    overlay-containers/containers.json, each with its volatile-*.json). An image's layer is
    a container's lower, never changed in place, so a snapshot's and a node's may share it."""
    layers = _field(storage / "overlay-layers", "layers.json", "id")
    written = _field(storage / "overlay-containers", "containers.json", "layer")
    found = (storage / "overlay" / layer for layer in sorted(layers - written))
    return [path for path in found if path.is_dir()]


def _field(folder: Path, name: str, field: str) -> set[str]:
    found = set()
    for file in (folder / name, folder / f"volatile-{name}"):
        try:
            found |= {entry[field] for entry in json.loads(file.read_text()) if entry.get(field)}
        except (OSError, ValueError, TypeError, KeyError):
            continue
    return {value for value in found if "/" not in value and value not in ("", ".", "..")}


def copy_all(pairs: list[tuple[Path, Path]]) -> None:
    """Each (source, target) copied, all at once: each node's folders are its own disk work."""
    with ThreadPoolExecutor(max_workers=max(len(pairs), 1)) as pool:
        list(pool.map(lambda pair: copy(*pair), pairs))


def running_units(node: str, ssh: list[str]) -> list[str]:
    result = subprocess.run([*ssh, RUNNING], capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise LabError(f"snapshot: {node}: its running services unread: {result.stderr.strip()}")
    return sorted(line for line in result.stdout.splitlines() if line.strip())


def all_active(ssh: list[str], units: list[str]) -> bool:
    pairs = (unit.split(" ", 1) for unit in units)
    checks = SYSTEMCTL + " ".join(f"sc {m} is-active -q {u} &&" for m, u in pairs)
    try:
        return (
            subprocess.run([*ssh, f"{checks} true"], capture_output=True, timeout=60).returncode
            == 0
        )
    except subprocess.TimeoutExpired:  # a node still booting may not answer yet
        return False


def wait_units(nodes: dict[str, list[str]], units: dict[str, list[str]]) -> None:
    """Every unit that ran on each node (`nodes`: its ssh command line) when it was saved runs
    again, all within UNITS_TIMEOUT."""
    deadline = time.monotonic() + UNITS_TIMEOUT
    waiting = dict(nodes)
    while waiting:
        waiting = {n: ssh for n, ssh in waiting.items() if not all_active(ssh, units[n])}
        if waiting and time.monotonic() > deadline:
            node, ssh = next(iter(waiting.items()))
            missing = sorted(set(units[node]) - set(running_units(node, ssh)))
            raise LabError(
                f"restore: {node}: not running after {UNITS_TIMEOUT:.0f} s: {', '.join(missing)}"
            )
        if waiting:
            time.sleep(0.5)


def save_layer(upper: Path) -> str:
    """The node's upper folder moved into the layers as a new one; its name."""
    LAYERS.mkdir(parents=True, exist_ok=True)
    layer = uuid.uuid4().hex[:12]
    upper.rename(LAYERS / layer)
    return layer


def layers_file(node_root: Path) -> Path:
    """Which layers a node's root runs on, top first (none: the root filesystem alone)."""
    return node_root / "layers"


def node_layers(node_root: Path) -> list[str]:
    try:
        return json.loads(layers_file(node_root).read_text())
    except (OSError, ValueError):
        return []


def lowers(layers: list[str], lower: Path) -> list[Path]:
    return [*(LAYERS / layer for layer in layers), lower]


def saved_controller_files(lab_dir: Path) -> list[Path]:
    """The controller's files a snapshot holds: all of `.lab/` but the nodes, a removal under
    way and ssh's sockets to the nodes (their own connections, which a restore opens anew)."""
    top = [p for p in lab_dir.iterdir() if p.name != "nodes" and not p.name.startswith(RUNS)]
    ssh = lab_dir / "ssh"
    return [p for p in top if p != ssh] + sorted(p for p in ssh.glob("*") if p.name != "mux")


def save_controller(lab_dir: Path, target: Path) -> None:
    for path in saved_controller_files(lab_dir):
        into = target / path.relative_to(lab_dir)
        into.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            shutil.copytree(path, into, symlinks=True)
        else:
            shutil.copy2(path, into)


def restore_controller(source: Path, lab_dir: Path) -> None:
    """`.lab/` as saved: what was saved put back, what came after it removed."""
    for path in saved_controller_files(lab_dir):
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    for path in saved_controller_files(source):
        into = lab_dir / path.relative_to(source)
        into.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            shutil.copytree(path, into, symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copy2(path, into)


def repositories(registry: Path) -> Path:
    return registry / "docker" / "registry" / "v2" / "repositories"


def save_registry(registry: Path, target: Path) -> None:
    """The registry's tags and links and the lab's seed markers (its blobs stay shared)."""
    target.mkdir(parents=True)
    if repositories(registry).is_dir():
        copy(repositories(registry), target / "repositories")
    for marker in registry.glob(".seeded*"):
        shutil.copy2(marker, target / marker.name)


def restore_registry(source: Path, registry: Path) -> None:
    if (source / "repositories").is_dir():
        copy(source / "repositories", repositories(registry))
    for marker in registry.glob(".seeded*"):
        marker.unlink()
    for marker in source.glob(".seeded*"):
        shutil.copy2(marker, registry / marker.name)


def drop_unused_layers() -> None:
    """Remove each layer no snapshot names and no node's root is mounted on."""
    named = set()
    for meta in SNAPSHOTS.glob(f"*/{META}"):
        try:
            named |= {
                x for layers in json.loads(meta.read_text())["layers"].values() for x in layers
            }
        except (OSError, ValueError, KeyError):
            continue
    mounts = Path("/proc/self/mountinfo").read_text()
    layers = sorted(LAYERS.glob("*")) if LAYERS.is_dir() else []
    remove_later([x for x in layers if x.name not in named and str(x) not in mounts])


def remove_later(folders: list[Path]) -> None:
    """`folders` deleted in the background, with a save's partial folders an interruption left."""
    partial = [p for p in SNAPSHOTS.glob(".*-*") if not p.name.startswith(REMOVING)]
    sh.remove_in_background([*folders, *partial], SNAPSHOTS, REMOVING)


def listing() -> list[str]:
    """One line per snapshot: its name, nodes, link, whether it is fresh, when it was saved."""
    lines = []
    current = key()
    for meta_path in sorted(SNAPSHOTS.glob(f"*/{META}")):
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            continue
        freshness = "fresh" if meta.get("key") == current else "stale"
        saved = time.strftime("%Y-%m-%d %H:%M", time.localtime(meta.get("saved", 0)))
        nodes = len(meta.get("nodes", []))
        lines.append(
            f"{meta_path.parent.name:24} {nodes} nodes {meta['link']:12} {freshness:6} {saved}"
        )
    return lines


def forget(names: list[str]) -> list[str]:
    """Remove the named snapshots (every one for none); the names removed."""
    targets = [folder(name) for name in names] if names else sorted(SNAPSHOTS.glob(f"*/{META}"))
    found = [t.parent if t.name == META else t for t in targets]
    found = [target for target in found if target.is_dir()]
    remove_later(found)
    drop_unused_layers()
    return [target.name for target in found]
