"""Prometheus' and Grafana's images pinned in the cluster's lock, planned on recorded nodes
(issue 37, items 2 and 4; roles/metrics/pins.py): a tag the head resolves is recorded in the lock
when the run runs and kept by the next run while the registry moves the tag; a new tag is
resolved anew and replaces the pin; a digest is run as written; a lock without the pin adopts
the quadlet's record of the head, and a dry run writes nothing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from halo_cluster.config import lock as locks
from halo_cluster.node.image import ResolvedImage
from tests.plan.harness import Plan, fact_reads, given, plan, run_on_controller
from tests.plan.nodes import HOME, RESOLVED, serve_cluster, user_node

VLLM = "docker.io/kyuz0/vllm-therock-gfx1151:latest"
PROMETHEUS = "quay.io/prometheus/prometheus"
TAG = f"{PROMETHEUS}:v3.5.0"  # metrics.image's default
GRAFANA = "docker.io/grafana/grafana"
GRAFANA_TAG = f"{GRAFANA}:12.3.1"
MOVED = "sha256:" + "cd" * 32  # the tag's build once upstream moved it
OTHER = "sha256:" + "ef" * 32
UNITS = f"{HOME}/.config/containers/systemd"
UNIT = f"{UNITS}/halo-prometheus.container"
ON = "metrics: {enabled: true}\n"


def lock_file(tmp_path: Path, **pins: locks.Pin) -> Path:
    """The cluster's lock, the serving image's digest recorded, with `pins` ({key: Pin}, the
    key's dot as `__`)."""
    lock = locks.Lock("halo1", VLLM, RESOLVED)
    for key, pin in pins.items():
        lock = lock.pin(key.replace("__", "."), pin)
    path = locks.path(tmp_path)
    locks.write(path, lock)
    return path


def metrics_plan(
    tmp_path: Path, top: str = ON, answers: dict[str, str] | None = None, files=None
) -> Plan:
    """The plan of a two-node cluster with `top`; the head's registry answers each reference of
    `answers` with its digest (any other with RESOLVED)."""
    for name, text in (("key", "sk-test"), ("gpw", "grafana-secret")):
        (tmp_path / name).write_text(text + "\n")
    cluster = serve_cluster(serve=", api_key_file: key", tmp_path=tmp_path, top=top)
    nodes = {n.name: user_node(files=dict(files or {})) for n in cluster.nodes}
    for reference, digest in (answers or {}).items():
        nodes["halo1"][given(ResolvedImage, user="vllm", reference=reference)] = [digest]
    return plan(cluster, nodes)


def resolves(result: Plan, reference: str) -> bool:
    return f"docker://{reference}" in " ".join(fact_reads(result, "halo1"))


def records(result: Plan) -> list[str]:
    return [n for n in result.names("halo1") if n.startswith("Metrics | Record ")]


def pins(path: Path) -> dict[str, tuple[str, str]]:
    found, lines = locks.read(path)
    assert lines == [] and found is not None, lines
    return {key: (pin.reference, pin.digest) for key, pin in found.pins.items()}


def test_a_resolved_tag_is_recorded_and_the_next_run_keeps_it(tmp_path: Path) -> None:
    path = lock_file(tmp_path)
    top = "metrics: {enabled: true, grafana: true, grafana_password_file: gpw}\n"
    first = metrics_plan(tmp_path, top, {GRAFANA_TAG: OTHER})
    assert resolves(first, TAG) and resolves(first, GRAFANA_TAG)
    assert records(first) == [
        f"Metrics | Record Prometheus' {RESOLVED} in {path}",
        f"Metrics | Record Grafana's {OTHER} in {path}",
    ]
    assert pins(path) == {}  # written when the operation runs, never while planning
    run_on_controller(first, "halo1", tuple(records(first)))
    assert pins(path) == {
        "metrics.image": (TAG, RESOLVED),
        "metrics.grafana_image": (GRAFANA_TAG, OTHER),
    }
    found, _ = locks.read(path)
    assert found is not None and found.digest == RESOLVED  # the serving image's, untouched
    # upstream moved both tags: the next run asks no registry and runs the lock's digests
    again = metrics_plan(tmp_path, top, {TAG: MOVED, GRAFANA_TAG: MOVED})
    assert not resolves(again, TAG) and not resolves(again, GRAFANA_TAG)
    assert records(again) == []
    assert f"Image={PROMETHEUS}@{RESOLVED}" in again.uploads("halo1")[UNIT].splitlines()
    grafana = again.uploads("halo1")[f"{UNITS}/halo-grafana.container"]
    assert f"Image={GRAFANA}@{OTHER}" in grafana.splitlines()
    assert MOVED not in " ".join(again.commands("halo1"))


def test_a_changed_reference_is_resolved_anew_and_replaces_the_pin(tmp_path: Path) -> None:
    path = lock_file(tmp_path, metrics__image=locks.Pin(TAG, RESOLVED))
    new = f"{PROMETHEUS}:v3.6.0"
    result = metrics_plan(tmp_path, f"metrics: {{enabled: true, image: '{new}'}}\n", {new: MOVED})
    assert resolves(result, new)
    unit = result.uploads("halo1")[UNIT]
    assert f"Image={PROMETHEUS}@{MOVED}" in unit.splitlines()
    assert f"# image: {new} resolved to {MOVED}" in unit.splitlines()  # the head's record
    assert records(result) == [f"Metrics | Record Prometheus' {MOVED} in {path}"]
    run_on_controller(result, "halo1", tuple(records(result)))
    assert pins(path) == {"metrics.image": (new, MOVED)}


def test_a_reference_with_a_digest_is_run_as_written(tmp_path: Path) -> None:
    path = lock_file(tmp_path, metrics__image=locks.Pin(TAG, RESOLVED))
    written = f"{PROMETHEUS}@{MOVED}"
    result = metrics_plan(tmp_path, f"metrics: {{enabled: true, image: '{written}'}}\n")
    assert not resolves(result, PROMETHEUS)
    assert f"Image={written}" in result.uploads("halo1")[UNIT].splitlines()
    assert records(result) == []
    assert pins(path) == {"metrics.image": (TAG, RESOLVED)}  # kept for the tag, unused


def head_record(digest: str) -> dict[str, str]:
    """The head's quadlet as a version before the pins left it: its comment records the tag's
    digest."""
    return {UNIT: f"# Managed by halo-cluster\n# image: {TAG} resolved to {digest}\n"}


def test_a_lock_without_the_pin_adopts_the_heads_record(tmp_path: Path) -> None:
    """A lock an older version wrote: the quadlet's record is taken (the tag moved since, the
    registry is not asked for it) and written into the lock while planning, with no operation
    (a drift run stays 0)."""
    path = lock_file(tmp_path)
    result = metrics_plan(tmp_path, answers={TAG: MOVED}, files=head_record(OTHER))
    assert f"Image={PROMETHEUS}@{OTHER}" in result.uploads("halo1")[UNIT].splitlines()
    assert records(result) == []
    assert pins(path) == {"metrics.image": (TAG, OTHER)}


def test_a_dry_run_adopts_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = lock_file(tmp_path)
    monkeypatch.setattr(sys, "argv", ["pyinfra", "--dry", "inventory.py", "deploy.py"])
    result = metrics_plan(tmp_path, files=head_record(OTHER))
    assert f"Image={PROMETHEUS}@{OTHER}" in result.uploads("halo1")[UNIT].splitlines()
    assert records(result) == [] and pins(path) == {}


def test_the_lock_wins_over_another_digest_in_the_quadlet(tmp_path: Path) -> None:
    """The lock is the source of truth: a quadlet written from another checkout's lock is
    rewritten on this lock's digest."""
    lock_file(tmp_path, metrics__image=locks.Pin(TAG, RESOLVED))
    result = metrics_plan(tmp_path, files=head_record(OTHER))
    assert f"Image={PROMETHEUS}@{RESOLVED}" in result.uploads("halo1")[UNIT].splitlines()
    assert not resolves(result, TAG) and records(result) == []
