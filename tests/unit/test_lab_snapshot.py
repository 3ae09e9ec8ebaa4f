"""The lab's snapshots (lab/snapshot.py) without a lab: what a restore refuses before it touches
anything (a stale key, a missing snapshot or layer, a name that is a path), what the key covers,
and what the controller's and the registry's copies hold. Saving and restoring a running lab is
the e2e test's (tests/e2e/test_snapshot.py)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from lab import command, releases, rootfs, snapshot
from lab.sh import LabError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setattr(snapshot, "SNAPSHOTS", tmp_path / "snapshots")
    monkeypatch.setattr(snapshot, "LAYERS", tmp_path / "snapshots" / "layers")
    return tmp_path / "snapshots"


def saved(cache: Path, name: str, key: str, layers: list[str]) -> Path:
    folder = cache / name
    folder.mkdir(parents=True)
    for layer in layers:
        (cache / "layers" / layer).mkdir(parents=True, exist_ok=True)
    meta = {"key": key, "nodes": ["node1"], "link": "roce", "layers": {"node1": layers}}
    meta["rootfs"] = snapshot.rootfs_build(rootfs.rootfs_path(releases.DEFAULT))
    (folder / snapshot.META).write_text(json.dumps({**meta, "saved": 0}))
    return folder


def test_a_fresh_snapshot_loads(cache: Path) -> None:
    saved(cache, "serving", snapshot.key(), ["a1", "b2"])
    assert snapshot.load("serving")["layers"] == {"node1": ["a1", "b2"]}
    assert snapshot.fresh("serving")


def test_a_stale_snapshot_is_refused_in_one_line_and_never_restored(cache: Path, capsys) -> None:
    """The restore stops before `down`: whatever lab runs is left as it is."""
    saved(cache, "serving", "0123456789abcdef", ["a1"])
    assert not snapshot.fresh("serving")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("lab.cli.down", lambda **_: pytest.fail("the lab was taken down"))
        assert command.main(["restore", "serving"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert err.startswith("lab: restore serving: stale, saved from other sources (key 0123")
    assert err.endswith("take it again with `python -m lab snapshot serving`")


def test_a_snapshot_over_another_build_of_the_root_filesystem_is_stale(
    cache: Path, tmp_path: Path, monkeypatch
) -> None:
    """Layers fit the lower they were written over: a rebuild under the same recipe is not it."""
    lower = tmp_path / "rootfs-abc"
    lower.mkdir()
    (lower / ".complete").touch()
    monkeypatch.setattr(rootfs, "rootfs_path", lambda release: lower)
    saved(cache, "serving", snapshot.key(), ["a1"])
    assert snapshot.fresh("serving")
    (lower / ".complete").unlink()
    (lower / ".complete").touch()  # rebuilt: another moment
    os.utime(lower / ".complete", ns=(1, 1))
    with pytest.raises(LabError, match="stale, saved over another build of the root filesystem"):
        snapshot.load("serving")


def test_a_missing_snapshot_or_layer_is_refused(cache: Path) -> None:
    with pytest.raises(LabError, match="restore converged: no snapshot of that name"):
        snapshot.load("converged")
    saved(cache, "serving", snapshot.key(), ["a1", "b2"])
    shutil.rmtree(cache / "layers" / "b2")
    with pytest.raises(LabError, match="its layers b2 are gone: take it again"):
        snapshot.load("serving")


@pytest.mark.parametrize("name", ["", "../x", "a/b", ".hidden", "layers"])
def test_a_name_is_a_plain_name(name: str) -> None:
    with pytest.raises(LabError, match="a plain name, not a path"):
        snapshot.folder(name)


@pytest.mark.parametrize(
    "source", ["roles", "templates", "halo_cluster", "lab", "deploy.py", "constraints.txt"]
)
def test_the_key_changes_with_every_source(tmp_path: Path, monkeypatch, source: str) -> None:
    """A copy of the sources keys as the checkout does; one byte more in any of them (a role,
    a template, the lab's recipe, the pins) gives another key."""
    for each in snapshot.KEY_SOURCES:
        path = ROOT / each
        copy = shutil.copytree if path.is_dir() else shutil.copy2
        (tmp_path / each).parent.mkdir(parents=True, exist_ok=True)
        copy(path, tmp_path / each)
    monkeypatch.setattr(snapshot, "PROJECT", tmp_path)
    before = snapshot.key()
    target = tmp_path / source
    file = next(p for p in sorted(target.rglob("*")) if p.is_file()) if target.is_dir() else target
    file.write_bytes(file.read_bytes() + b"\n")
    assert snapshot.key() != before


def test_every_key_source_exists() -> None:
    assert [s for s in snapshot.KEY_SOURCES if not (ROOT / s).exists()] == []


def test_the_controllers_copy_leaves_out_the_nodes_and_the_ssh_sockets(tmp_path: Path) -> None:
    lab = tmp_path / "lab"
    for path in ("nodes/node1/upper/etc/x", "ssh/mux/root@10.99.1.2", "removing-1/y"):
        (lab / path).parent.mkdir(parents=True, exist_ok=True)
        (lab / path).write_text("")
    for path in ("ssh/id_ed25519", "ssh/known_hosts", "cluster.yml", ".halo-cluster/x.lock"):
        (lab / path).parent.mkdir(parents=True, exist_ok=True)
        (lab / path).write_text(path)
    snapshot.save_controller(lab, tmp_path / "saved")
    kept = sorted(str(p.relative_to(tmp_path / "saved")) for p in (tmp_path / "saved").rglob("*"))
    assert kept == [
        ".halo-cluster",
        ".halo-cluster/x.lock",
        "cluster.yml",
        "ssh",
        "ssh/id_ed25519",
        "ssh/known_hosts",
    ]
    (lab / "cluster.yml").write_text("changed")
    (lab / "builds.json").write_text("[a build published after the save]")
    snapshot.restore_controller(tmp_path / "saved", lab)
    assert (lab / "cluster.yml").read_text() == "cluster.yml"
    assert not (lab / "builds.json").exists()
    assert (lab / "ssh/mux/root@10.99.1.2").exists() and (lab / "nodes/node1/upper/etc/x").exists()


def test_the_registrys_tags_are_saved_and_its_blobs_shared(tmp_path: Path) -> None:
    registry = tmp_path / "registry"
    link = snapshot.repositories(registry) / "kyuz0/x/_manifests/tags/latest/current/link"
    blob = registry / "docker/registry/v2/blobs/sha256/ab/abc/data"
    for path, text in ((link, "sha256:seed"), (blob, "layer"), (registry / ".seeded", "s")):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    snapshot.save_registry(registry, tmp_path / "saved")
    assert not list((tmp_path / "saved").rglob("data"))
    link.write_text("sha256:published")
    (registry / ".seeded-prometheus-1").touch()
    snapshot.restore_registry(tmp_path / "saved", registry)
    assert link.read_text() == "sha256:seed"
    assert blob.read_text() == "layer"
    assert sorted(p.name for p in registry.glob(".seeded*")) == [".seeded"]


def test_forget_keeps_the_layers_another_snapshot_names(cache: Path) -> None:
    saved(cache, "converged", snapshot.key(), ["base"])
    saved(cache, "serving", snapshot.key(), ["top", "base"])
    assert snapshot.forget(["serving"]) == ["serving"]
    assert sorted(p.name for p in (cache / "layers").iterdir()) == ["base"]
    assert snapshot.forget([]) == ["converged"]
    assert list((cache / "layers").iterdir()) == []


def storage_of(home: Path) -> Path:
    """A rootless podman storage as containers/storage lays it out: an image of two layers, a
    container's own layer over them, its database beside."""
    storage = home / "vllm/.local/share/containers/storage"
    for layer in ("base", "top", "container"):
        (storage / "overlay" / layer / "diff").mkdir(parents=True)
        (storage / "overlay" / layer / "diff" / "file").write_text(layer)
    (storage / "overlay-layers").mkdir()
    layers = [{"id": "base"}, {"id": "top", "parent": "base"}]
    (storage / "overlay-layers/layers.json").write_text(json.dumps(layers))
    volatile = [{"id": "container", "parent": "top"}]
    (storage / "overlay-layers/volatile-layers.json").write_text(json.dumps(volatile))
    (storage / "overlay-containers").mkdir()
    containers = [{"id": "c1", "layer": "container"}]
    (storage / "overlay-containers/containers.json").write_text(json.dumps(containers))
    (storage / "db.sql").write_text("state")
    (storage / "overlay").chmod(0o701)
    return storage


def test_a_copy_shares_the_image_layers_and_copies_what_is_written(tmp_path: Path) -> None:
    """An image's layers are hard links (no container writes them); the container's own layer,
    podman's database and everything else are copies, which the copy's user may change freely."""
    storage = storage_of(tmp_path / "home")
    (tmp_path / "home/vllm/.cache").mkdir()
    (tmp_path / "home/vllm/.cache/model").write_text("weights")
    assert snapshot.read_only_layers(storage) == [storage / "overlay/base", storage / "overlay/top"]
    snapshot.copy(tmp_path / "home", tmp_path / "saved")
    copied = tmp_path / "saved/vllm/.local/share/containers/storage"

    def same(relative: str) -> bool:
        return (storage / relative).stat().st_ino == (copied / relative).stat().st_ino

    assert same("overlay/base/diff/file") and same("overlay/top/diff/file")
    assert not same("overlay/container/diff/file") and not same("db.sql")
    assert (tmp_path / "saved/vllm/.cache/model").read_text() == "weights"
    assert (tmp_path / "saved/vllm/.cache/model").stat().st_ino != (
        tmp_path / "home/vllm/.cache/model"
    ).stat().st_ino
    assert (copied / "overlay").stat().st_mode & 0o777 == 0o701  # a folder above a link too
