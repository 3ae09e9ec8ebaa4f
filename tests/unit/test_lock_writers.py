"""Every writer of the lock reads, changes and replaces it under one file lock (issue 45 item 16):
two writers at once, in threads and in processes, both find their record; an upgrade's lock
keeps the members and pins its own deploys recorded; no shipped module replaces the lock whole.
The writers are the roles' own (`_record_members`, `_record_pin`, `_record_head`)."""

from __future__ import annotations

import ast
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from halo_cluster.config import lock as locks
from halo_cluster.config import lockfile
from halo_cluster.roles.container.operations import _record_head
from halo_cluster.roles.metrics.pins import _record_pin
from halo_cluster.roles.serve.controller import _record_members
from halo_cluster.tools.upgrading.image import Upgrade
from halo_cluster.tools.upgrading.machine import OK, ROLLED_BACK
from tests.unit.helpers_upgrade import D0, D1, NAME, REFERENCE, FakeCluster, lock_of, serving_lock

ROOT = Path(__file__).resolve().parents[2]
HOST = SimpleNamespace(print_prefix="[node1] ")  # what the writers log by: the only use of it
TAG = "quay.io/prometheus/prometheus:v3.5.0"
PROMETHEUS = "sha256:" + "cd" * 32
MEMBERS = {"node1": "192.168.100.1", "node2": "192.168.100.2"}


def _slow_pin(path: Path, inside: threading.Event, hold: float) -> None:
    """A writer that holds the lock `hold` seconds between its read and its write."""

    def change(found: locks.Lock | None) -> locks.Lock | None:
        inside.set()
        time.sleep(hold)
        return None if found is None else found.pin("metrics.image", locks.Pin(TAG, PROMETHEUS))

    locks.update(path, change)


def test_two_writers_in_threads_keep_both_records(tmp_path: Path) -> None:
    """In a fresh interpreter: importing pyinfra_cli (other tests do) patches threading and
    time.sleep with gevent's for the rest of the session (its __init__: monkey.patch_all), where
    this test's writer, sleeping inside the lock, yields to the other, whose flock then blocks
    the one OS thread both run on."""
    code = (
        f"from {__name__} import two_writers_in_threads; two_writers_in_threads({str(tmp_path)!r})"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


def two_writers_in_threads(folder: str) -> None:
    path = serving_lock(Path(folder))
    inside = threading.Event()
    pinning = threading.Thread(target=_slow_pin, args=(path, inside, 0.5))
    pinning.start()
    assert inside.wait(10)
    started = time.monotonic()
    # read while the pin's writer holds its copy: without the file lock this read is stale
    assert _record_members(None, HOST, str(path), MEMBERS)
    waited = time.monotonic() - started
    pinning.join(10)
    lock = lock_of(path)
    assert lock.pinned("metrics.image", TAG) == PROMETHEUS
    assert [m.name for m in lock.members] == ["node1", "node2"]
    assert waited > 0.2  # the second writer waited for the first


CHILD = """
import sys, time
from pathlib import Path
from halo_cluster.config import lock as locks
def change(found):
    Path(sys.argv[2]).write_text("inside")
    time.sleep(1.0)
    return found.pin("metrics.image", locks.Pin(sys.argv[3], sys.argv[4]))
locks.update(Path(sys.argv[1]), change)
"""


def test_two_writers_in_processes_keep_both_records(tmp_path: Path) -> None:
    path = serving_lock(tmp_path, head="node1")
    inside = tmp_path / "inside"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(inside), TAG, PROMETHEUS], cwd=ROOT
    )
    deadline = time.monotonic() + 30
    while not inside.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert inside.exists(), f"the child never took the lock (exit {child.poll()})"
    assert _record_head(None, HOST, str(path), "node2", "node1")
    assert _record_members(None, HOST, str(path), MEMBERS)
    assert child.wait(30) == 0
    lock = lock_of(path)
    assert lock.head == "node2" and lock.pinned("metrics.image", TAG) == PROMETHEUS
    assert [m.name for m in lock.members] == ["node1", "node2"]


def test_the_guard_is_a_sibling_and_an_unreadable_lock_is_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / locks.LOCK_FILE
    path.write_text("{not json")
    assert not _record_pin(None, HOST, str(path), "metrics.image", TAG, PROMETHEUS)
    assert path.read_text() == "{not json"
    assert lockfile.guard(path) == tmp_path / ".halo-cluster.lock.flock"


class DeployingCluster(FakeCluster):
    """The fake cluster whose switch deploys as a real one does: the deploy records the
    members and Prometheus' pin in the lock (the roles' own writers)."""

    lock: Path = Path()

    def switch(self, pinned: str, stop_first: bool = False) -> str | None:
        assert _record_members(None, HOST, str(self.lock), MEMBERS)
        assert _record_pin(None, HOST, str(self.lock), "metrics.image", TAG, PROMETHEUS)
        return super().switch(pinned, stop_first)


def test_an_upgrade_keeps_what_its_deploys_recorded(tmp_path: Path) -> None:
    path = serving_lock(tmp_path)
    runner = DeployingCluster()
    runner.lock = path
    assert Upgrade(path, REFERENCE, runner, lambda _: None).upgrade() == OK
    lock = lock_of(path)
    assert (lock.digest, lock.trial, lock.previous and lock.previous.digest) == (D1, False, D0)
    assert lock.pinned("metrics.image", TAG) == PROMETHEUS
    assert [m.name for m in lock.members] == ["node1", "node2"]


def test_a_rollback_keeps_what_its_deploys_recorded(tmp_path: Path) -> None:
    path = serving_lock(tmp_path)
    runner = DeployingCluster(completion_errors={f"{NAME}@{D1}": "HTTP 500: engine dead"})
    runner.lock = path
    assert Upgrade(path, REFERENCE, runner, lambda _: None).upgrade() == ROLLED_BACK
    lock = lock_of(path)
    assert (lock.digest, [r.digest for r in lock.rejected]) == (D0, [D1])
    assert lock.pinned("metrics.image", TAG) == PROMETHEUS
    assert [m.name for m in lock.members] == ["node1", "node2"]


def test_with_image_changes_the_image_and_keeps_the_records() -> None:
    found = locks.Lock("node2", REFERENCE, D0, members=locks.members_of(MEMBERS))
    found = found.pin("metrics.image", locks.Pin(TAG, PROMETHEUS))
    source = locks.Lock("node1", f"{NAME}:other", D1, trial=True, previous=locks.Build(D0))
    moved = locks.with_image(found, source)
    assert moved == replace(found, reference=source.reference, digest=D1, trial=True,
                            previous=locks.Build(D0))  # fmt: skip
    assert locks.with_image(None, source) == source


def _writes_whole(path: Path) -> list[int]:
    """The lines of `path` that call the lock's whole-file `write` (`locks.write`)."""
    tree = ast.parse(path.read_text())
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "write"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in ("locks", "lock")
    ]


def test_no_shipped_module_replaces_the_lock_whole() -> None:
    shipped = [*ROOT.glob("halo_cluster/**/*.py"), *ROOT.glob("roles/**/*.py")]
    shipped += [ROOT / "deploy.py", ROOT / "inventory.py"]
    found = {str(p.relative_to(ROOT)): lines for p in shipped if (lines := _writes_whole(p))}
    assert found == {}, "a writer replaces the lock whole: change it by locks.update"
