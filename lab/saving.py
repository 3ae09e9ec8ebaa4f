"""Saving the running lab as a snapshot and bringing one back (what lab/snapshot.py holds, and
where, is said there; docs/lab.md, "Snapshots")."""

from __future__ import annotations

import json
import shutil
import time

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
    key = snapshot.key()  # before the nodes go down: the sources are read once, as saved
    lower, shared, _ = cli.shared_folders()
    units = {
        n: snapshot.running_units(cli.ssh_argv(cli.node_address(state, n))) for n in state["nodes"]
    }
    for each in state["nodes"]:
        node.request_stop(cli.node_dirs(each))
    cli.close_shared_connections()
    for each in state["nodes"]:
        node.stop(cli.node_dirs(each), each, timeout=POWEROFF_TIMEOUT)
    snapshot.SNAPSHOTS.mkdir(parents=True, exist_ok=True)
    partial = snapshot.SNAPSHOTS / f".{name}-{time.time_ns()}"
    layers = {}
    copies = [
        (cli.node_dirs(each).root / sub, partial / "nodes" / each / sub)
        for each in state["nodes"]
        for sub in NODE_FOLDERS
    ]
    snapshot.copy_all(copies)
    for each in state["nodes"]:
        dirs = cli.node_dirs(each)
        layers[each] = [snapshot.save_layer(dirs.root / "upper"), *snapshot.node_layers(dirs.root)]
        shutil.rmtree(dirs.root / "work")
        node.mount_root(dirs, snapshot.lowers(layers[each], lower))
        snapshot.layers_file(dirs.root).write_text(json.dumps(layers[each]))
    snapshot.save_controller(cli.LAB_DIR, partial / "controller")
    snapshot.save_registry(shared.registry, partial / "registry")
    meta = {
        "key": key,
        "nodes": state["nodes"],
        "link": state["link"],
        "layers": layers,
        "units": units,
        "boots": {n: cli.node_dirs(n).boots() for n in state["nodes"]},
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


def restore(name: str) -> float:
    """Replace whatever lab runs with the snapshot `name`, booted and its services running
    again; the seconds taken."""
    started = time.monotonic()
    meta = snapshot.load(name)
    source = snapshot.folder(name)
    cli.down(quiet=True, poweroff=0)
    snapshot.drop_unused_layers()  # a forgotten snapshot's, which the lab ran on until now
    lower, shared, _ = cli.shared_folders()
    state = {"nodes": meta["nodes"], "link": meta["link"]}
    network.create(state["nodes"], state["link"])
    copies = [
        (source / "nodes" / each / sub, cli.node_dirs(each).root / sub)
        for each in state["nodes"]
        for sub in NODE_FOLDERS
    ]
    snapshot.copy_all(copies)
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


def mark(state: dict, name: str) -> None:
    """The lab's state says which snapshot it runs as (until new nodes replace it)."""
    cli.STATE.write_text(json.dumps({**state, "snapshot": name}))


def boot(state: dict, shared: node.Shared, units: dict[str, list[str]]) -> None:
    """Every node booted and running the services it ran when saved."""
    cli.boot(state, shared)
    for each in state["nodes"]:
        snapshot.wait_units(each, cli.ssh_argv(cli.node_address(state, each)), units[each])
