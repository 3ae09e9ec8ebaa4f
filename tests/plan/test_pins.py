"""One digest for the whole cluster (issue 25), planned on recorded skopeo outputs: the head
resolves cluster.yml's image once, every node pulls and runs that digest, the lock beside
cluster.yml keeps it for every later run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from halo_cluster.config import lock as locks
from halo_cluster.node import report
from halo_cluster.node.image import ContainerImages, HeadHistory, ResolvedImage
from halo_cluster.node.reads import NO_COMMAND
from tests.plan.harness import fact_reads, plan
from tests.plan.nodes import HOME, PINNED, RESOLVED, converged, plan_cluster, serve_cluster
from tests.recorded import container_image_line, fixture

UNITS = f"{HOME}/.config/containers/systemd"
NAME = "docker.io/kyuz0/vllm-therock-gfx1151"
OTHER = "sha256:" + "ab" * 32


def pulls(result, node: str) -> list[str]:
    return [c for c in result.commands(node) if "podman pull" in c]


def records(result, node: str) -> list[str]:
    return [n for n in result.names(node) if n.startswith("Image and toolbox | Record ")]


def test_the_head_resolves_once_and_every_node_runs_that_digest(tmp_path: Path) -> None:
    result = plan_cluster(serve_cluster(tmp_path=tmp_path))
    resolve = f"skopeo inspect --no-tags --format '{{{{.Digest}}}}' docker://{NAME}:latest"
    assert resolve in fact_reads(result, "halo1")[0]
    assert "skopeo" not in " ".join(fact_reads(result, "halo2"))  # the head's answer, taken
    for node in ("halo1", "halo2"):
        assert len(pulls(result, node)) == 1 and f"--quiet {PINNED} " in pulls(result, node)[0]
        uploads = result.uploads(node)
        assert f"Image={PINNED}" in uploads[f"{UNITS}/halo-ray.container"].splitlines()
    vllm = result.uploads("halo1")[f"{UNITS}/halo-vllm.container"]
    assert f"Image={PINNED}" in vllm.splitlines()
    toolbox = next(c for c in result.commands("halo2") if "toolbox create" in c)
    assert f"--image {PINNED} " in toolbox
    lock = locks.path(tmp_path)  # in the state folder: no lock yet
    assert records(result, "halo1") == [f"Image and toolbox | Record {RESOLVED} in {lock}"]
    assert records(result, "halo2") == []
    assert not lock.exists()  # written when the operation runs, never while planning


def test_a_locked_digest_is_not_resolved_again(tmp_path: Path) -> None:
    reference = f"{NAME}:latest"
    locks.write(tmp_path / locks.LOCK_FILE, locks.Lock("halo1", reference, OTHER))
    result = plan_cluster(serve_cluster(tmp_path=tmp_path))
    for node in ("halo1", "halo2"):
        assert "skopeo" not in " ".join(fact_reads(result, node))
        assert f"--quiet {NAME}@{OTHER} " in pulls(result, node)[0]  # not the tag's build now
        assert records(result, node) == []


def test_a_failed_resolve_pulls_and_starts_nothing(tmp_path: Path) -> None:
    error = fixture("skopeo-manifest-unknown.txt").splitlines()
    cluster = serve_cluster(tmp_path=tmp_path)
    result = plan_cluster(cluster, resolved=error)
    assert result.refused["halo1"] == (
        f"image: {NAME}:latest could not be resolved to a digest here (skopeo inspect as vllm): "
        f"{error[0]}"
    )
    assert result.refused["halo2"].startswith(f"image: {NAME}:latest could not be resolved")
    assert "on the head" in result.refused["halo2"]
    for node in ("halo1", "halo2"):
        assert pulls(result, node) == []
        assert not [p for p in result.uploads(node) if p.startswith(UNITS)]


def test_resolve_reads_the_top_level_digest_only() -> None:
    fact = ResolvedImage()
    assert fact.process([RESOLVED]).digest == RESOLVED
    assert fact.process(["", RESOLVED, ""]).digest == RESOLVED
    warned = fixture("skopeo-warning-no-runtime-dir.txt").splitlines()
    assert fact.process([*warned, RESOLVED]).digest == RESOLVED  # a fresh node's first resolve
    failed = fact.process(fixture("skopeo-manifest-unknown.txt").splitlines())
    assert failed.digest is None and failed.error.endswith("manifest unknown")
    assert fact.default().digest is None and "skopeo is not installed" in fact.default().error


def running(container: str, reference: str) -> str:
    """The ContainerImages line of a container made from `reference` (the recorded inspect's
    form, the image id as recorded)."""
    _, _, image_id = container_image_line().split()
    return f"{container} {reference} {image_id}"


def test_a_container_on_another_image_is_restarted_and_reported(tmp_path: Path) -> None:
    """The recorded container runs a tag (`docker.io/library/alpine:latest`): not the cluster's
    digest. Its service is restarted from its unit, on the cluster's digest, and the event
    drift reports is recorded; vLLM restarts with Ray."""
    cluster = serve_cluster(tmp_path=tmp_path)
    recorded = container_image_line().split()[1]
    worker = converged(cluster, "halo2")
    worker[ContainerImages] = [running("halo-ray", recorded)]
    head = converged(cluster, "halo1")
    head[ContainerImages] = [running("halo-ray", PINNED), running("halo-vllm", PINNED)]
    result = plan(cluster, {"halo1": head, "halo2": worker})
    assert "Cluster services | Restart halo-ray" in result.names("halo2")
    assert "Cluster services | Restart halo-ray" not in result.names("halo1")
    assert "Cluster services | Restart halo-vllm" not in result.names("halo1")
    assert result.mismatches == [
        {
            "node": "halo2",
            "kind": "image-mismatch",
            "container": "halo-ray",
            "running": recorded,
            "cluster": PINNED,
        }
    ]


def test_ray_starts_only_on_the_cluster_image_with_one_line_otherwise(tmp_path: Path) -> None:
    result = plan_cluster(serve_cluster(tmp_path=tmp_path))
    start = [c for c in result.commands("halo2") if "podman image exists" in c]
    assert len(start) == 1 and f"podman image exists {PINNED} ||" in start[0]
    assert (
        f"halo2: image {RESOLVED} (cluster) is not present (its pull failed): Ray not started; "
        f"the head runs {RESOLVED}"
    ) in start[0]


def history(digest: str, reference: str = f"{NAME}:latest") -> list[str]:
    """The head's history as the deploy writes it (`record_image`), with a later line of
    another kind."""
    resolved = locks.history_line(
        "resolved", reference=reference, digest=digest, changed=True, ray="2.60.0", vllm="0.33.0"
    )
    return [resolved, locks.history_line("image-repaired", node="halo2")]


def test_a_checkout_without_the_lock_adopts_the_heads_digest(tmp_path: Path) -> None:
    """A new checkout (or a CI runner) has no lock: the head's history says what it runs, and
    the cluster stays on it instead of resolving the tag again. The lock is written while the
    run is planned, with no operation on any node (a drift run of a new checkout stays 0)."""
    result = plan_cluster(serve_cluster(tmp_path=tmp_path), history=history(OTHER))
    assert "skopeo" not in " ".join(fact_reads(result, "halo2"))
    for node in ("halo1", "halo2"):
        assert f"--quiet {NAME}@{OTHER} " in pulls(result, node)[0]
    assert records(result, "halo1") == []
    lock, errors = locks.read(locks.path(tmp_path))  # adopted into the state folder
    assert not errors and lock is not None
    assert (lock.digest, lock.ray, lock.vllm) == (OTHER, "2.60.0", "0.33.0")


def test_a_dry_run_without_the_lock_writes_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`halo-cluster drift` and `deploy --dry` plan as the deploy does, from the head's digest,
    and leave the folder as it was: the next deploy writes the lock."""
    monkeypatch.setattr(sys, "argv", ["pyinfra", "--dry", "inventory.py", "deploy.py"])
    result = plan_cluster(serve_cluster(tmp_path=tmp_path), history=history(OTHER))
    for node in ("halo1", "halo2"):
        assert f"--quiet {NAME}@{OTHER} " in pulls(result, node)[0]
    assert not (tmp_path / locks.LOCK_FILE).exists() and not locks.path(tmp_path).exists()


def test_another_reference_in_the_history_is_resolved_anew(tmp_path: Path) -> None:
    result = plan_cluster(serve_cluster(tmp_path=tmp_path), history=history(OTHER, f"{NAME}:dev"))
    assert f"--quiet {PINNED} " in pulls(result, "halo1")[0]


def test_a_lock_the_head_disagrees_with_is_refused(tmp_path: Path) -> None:
    locks.write(tmp_path / locks.LOCK_FILE, locks.Lock("halo1", f"{NAME}:latest", RESOLVED))
    lines = history(OTHER)
    result = plan_cluster(serve_cluster(tmp_path=tmp_path), history=lines)
    time = json.loads(lines[0])["time"]
    line = (
        f"head: runs {OTHER} since {time}, halo-cluster.lock says {RESOLVED} (deployed from "
        f"another checkout?): copy that checkout's halo-cluster.lock to "
        f"{tmp_path.resolve() / locks.LOCK_FILE}"
    )
    assert result.refused == {"halo1": line, "halo2": line}
    assert pulls(result, "halo1") == [] and pulls(result, "halo2") == []


def test_the_history_reads_the_last_resolved_line() -> None:
    fact = HeadHistory()
    lines = [*history(RESOLVED), "{torn", *history(OTHER)[:1], "[]"]
    assert fact.process(lines).digest == OTHER
    assert fact.process([]).digest == ""


def test_an_upgraded_lock_agrees_with_the_heads_switch(tmp_path: Path, monkeypatch) -> None:
    """`halo-cluster upgrade` (issue 25 step 4): the lock moved to OTHER in trial, the history
    says the head switched to it after its candidate resolve; the upgrade's own deploy pulls and
    runs OTHER, and a candidate alone (an aborted upgrade) leaves the lock's digest the head's."""
    previous = locks.Build(RESOLVED)
    trial = locks.Lock("halo1", f"{NAME}:latest", OTHER, trial=True, previous=previous)
    locks.write(tmp_path / locks.LOCK_FILE, trial)
    candidate = locks.history_line(
        "resolved", reference=f"{NAME}:latest", digest=OTHER, changed=True, candidate=True
    )
    switched = locks.history_line("switched", reference=f"{NAME}:latest", to=OTHER,
                                  **{"from": RESOLVED})  # fmt: skip
    monkeypatch.setenv(locks.UPGRADING, "1")  # the upgrade's own deploy, on its trial lock
    lines = [*history(RESOLVED)[:1], candidate, switched]
    result = plan_cluster(serve_cluster(tmp_path=tmp_path), history=lines)
    monkeypatch.delenv(locks.UPGRADING)
    assert result.refused == {}
    assert f"--quiet {NAME}@{OTHER} " in pulls(result, "halo2")[0]
    locks.write(tmp_path / locks.LOCK_FILE, locks.Lock("halo1", f"{NAME}:latest", RESOLVED))
    aborted = plan_cluster(serve_cluster(tmp_path=tmp_path), history=[*lines[:2]])
    assert aborted.refused == {}


def test_an_image_moved_to_another_name_keeps_the_locks_pin_until_the_upgrade(
    tmp_path: Path, monkeypatch
) -> None:
    """The upgrade's converged check (its own dry run, which accepts the new `image`) plans
    the nodes as they run: the lock's name at its digest, nothing pulled, no unit rewritten."""
    locks.write(tmp_path / locks.LOCK_FILE, locks.Lock("halo1", f"{NAME}:latest", OTHER))
    monkeypatch.setenv(locks.UPGRADING, "1")
    fork = "docker.io/someone/vllm-fork:latest"
    result = plan_cluster(serve_cluster(tmp_path=tmp_path, top=f"image: {fork}\n"))
    for node in ("halo1", "halo2"):
        assert f"--quiet {NAME}@{OTHER} " in pulls(result, node)[0]
        ray = result.uploads(node)[f"{UNITS}/halo-ray.container"]
        assert f"Image={NAME}@{OTHER}" in ray.splitlines()
    assert "vllm-fork" not in " ".join(c for n in ("halo1", "halo2") for c in result.commands(n))


def test_a_head_without_skopeo_installs_it_and_says_the_next_run_resolves(
    tmp_path: Path, monkeypatch
) -> None:
    """A fresh head: its one read runs before the packages role, so skopeo is missing (the
    read's guard answers). Skopeo is still installed in this run, nothing is pulled or started
    by tag, each node's line says so, and the events are the ones `halo-cluster deploy` runs
    once more on (report.only_skopeo_pending)."""
    events = tmp_path / "report.jsonl"
    monkeypatch.setenv(report.REPORT_ENV, str(events))
    result = plan_cluster(serve_cluster(tmp_path=tmp_path), resolved=[NO_COMMAND])
    line = (
        "image: skopeo is not installed on the head (halo1) yet: the packages role installs it "
        f"in this run, the next run resolves {NAME}:latest"
    )
    assert result.refused == {"halo1": line, "halo2": line}
    dnf = next(c for c in result.commands("halo1") if c.startswith("dnf install"))
    assert "skopeo" in dnf.split()
    for node in ("halo1", "halo2"):
        assert pulls(result, node) == [] and records(result, node) == []
        assert not [p for p in result.uploads(node) if p.startswith(UNITS)]
        assert not [c for c in result.commands(node) if "toolbox create" in c]
    found = report.read_events(str(events))
    pending = [e for e in found if e["kind"] == report.SKOPEO_PENDING]
    assert sorted((e["node"], e["reason"]) for e in pending) == [("halo1", line), ("halo2", line)]
    assert report.only_skopeo_pending(found)
