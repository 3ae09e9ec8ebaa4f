"""Saving the running lab as a snapshot and bringing one back (what lab/snapshot.py holds, and
where, is said there; docs/lab.md, "Snapshots")."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from lab import cli, network, node, snapshot, throttle
from lab.sh import LabError

# a node saved powers off cleanly within this (its services' own stop timeouts, podman's 10 s
# for a container first), then is killed: its files are then a crash's, which a boot survives
POWEROFF_TIMEOUT = 30.0
# a node's plain folders (not on its overlay root), copied whole
NODE_FOLDERS = ("containers", "home")


def save(name: str) -> float:
    """Save the running lab as `name` (replacing a snapshot of that name), then boot it again
    from what was saved; the seconds taken."""
    started = time.monotonic()
    target = snapshot.folder(name)
    state = cli.load_state()
    if not state or not cli.all_running(state):
        raise LabError(f"snapshot {name}: the lab is not up (`python -m lab up` first)")
    lower, shared, _ = cli.shared_folders(cli.lab_release(state))
    units = {each: snapshot.running_units(each, ssh) for each, ssh in reach(state).items()}
    power_off(state)
    snapshot.SNAPSHOTS.mkdir(parents=True, exist_ok=True)
    partial = snapshot.SNAPSHOTS / f".{name}-{time.time_ns()}"
    snapshot.copy_all(
        [(cli.node_dirs(n).root / sub, partial / "nodes" / n / sub) for n, sub in folders(state)]
    )
    snapshot.save_controller(cli.LAB_DIR, partial / "controller")
    snapshot.save_registry(shared.registry, partial / "registry")
    meta = {
        "key": snapshot.key(),
        "rootfs": snapshot.rootfs_build(lower),
        "nodes": state["nodes"],
        "link": state["link"],
        "fedora": cli.lab_release(state).version,
        "layers": {each: save_root(each, lower) for each in state["nodes"]},
        "units": units,
        "boots": {each: cli.node_dirs(each).boots() for each in state["nodes"]},
        "saved": time.time(),
    }
    (partial / snapshot.META).write_text(json.dumps(meta, indent=1))
    if target.exists():
        snapshot.remove_later([target])
    partial.rename(target)
    snapshot.drop_unused_layers()
    mark(state, name)
    boot(state, shared, units)
    return time.monotonic() - started


def power_off(state: dict) -> None:
    """Every node powered off cleanly at once (within POWEROFF_TIMEOUT), its root unmounted."""
    for each in state["nodes"]:
        node.request_stop(cli.node_dirs(each))
    cli.close_shared_connections()
    for each in state["nodes"]:
        node.stop(cli.node_dirs(each), each, timeout=POWEROFF_TIMEOUT)


def save_root(name: str, lower: Path) -> list[str]:
    """The node's upper folder made a saved layer, the node's root mounted anew over it; the
    layers it now runs on, top first."""
    dirs = cli.node_dirs(name)
    layers = [snapshot.save_layer(dirs.root / "upper"), *snapshot.node_layers(dirs.root)]
    shutil.rmtree(dirs.root / "work")
    node.mount_root(dirs, snapshot.lowers(layers, lower))
    snapshot.layers_file(dirs.root).write_text(json.dumps(layers))
    return layers


def restore(name: str) -> float:
    """Replace whatever lab runs with the snapshot `name`, booted and its services running
    again; the seconds taken."""
    started = time.monotonic()
    meta = snapshot.load(name)
    source = snapshot.folder(name)
    cli.down(quiet=True, poweroff=0)
    snapshot.drop_unused_layers()  # a forgotten snapshot's, which the lab ran on until now
    state = {"nodes": meta["nodes"], "link": meta["link"], "fedora": meta.get("fedora")}
    lower, shared, _ = cli.shared_folders(cli.lab_release(state))
    network.create(state["nodes"], state["link"])
    snapshot.copy_all(
        [(source / "nodes" / n / sub, cli.node_dirs(n).root / sub) for n, sub in folders(state)]
    )
    for each in state["nodes"]:
        dirs = cli.node_dirs(each)
        node.mount_root(dirs, snapshot.lowers(meta["layers"][each], lower))
        snapshot.layers_file(dirs.root).write_text(json.dumps(meta["layers"][each]))
        dirs.boots_file.write_text(str(meta["boots"][each]))
    snapshot.restore_controller(source / "controller", cli.LAB_DIR)
    snapshot.restore_registry(source / "registry", shared.registry)
    mark(state, name)
    rate = throttle.current(cli.LAB_DIR / throttle.RATE_FILE)
    if rate:  # the kernel's pacing went with the namespaces: as the saved lab had it
        throttle.throttle(cli.LAB_DIR, state["nodes"], rate)
    boot(state, shared, meta["units"])
    return time.monotonic() - started


def folders(state: dict) -> list[tuple[str, str]]:
    return [(each, sub) for each in state["nodes"] for sub in NODE_FOLDERS]


def reach(state: dict) -> dict[str, list[str]]:
    """Each node's ssh command line."""
    return {each: cli.ssh_argv(cli.node_address(state, each)) for each in state["nodes"]}


def mark(state: dict, name: str) -> None:
    """The lab's state says which snapshot it runs as (until new nodes replace it)."""
    cli.STATE.write_text(json.dumps({**state, "snapshot": name}))


def boot(state: dict, shared: node.Shared, units: dict[str, list[str]]) -> None:
    """Every node booted and running the services it ran when saved."""
    cli.boot(state, shared)
    snapshot.wait_units(reach(state), units)
