"""The serving lab's metrics (issue 37 items 1, 2 and 8): Prometheus on the head (the lab's
Debian build under the upstream image's name, pinned by digest) has every target up, each read
on the data link; node_exporter (Debian's, under Fedora's package name and unit) listens on the
worker's data address only; a worker's node_exporter stopped is `up == 0` for it and fires
NodeDown, and is up again once started; every node's textfile timer reports its serving
services (Ray on both nodes, vLLM on the head) active, with their restarts, in a fresh file."""

from __future__ import annotations

import time

from halo_cluster.roles.metrics.model import NODE_EXPORTER_PORT, PROMETHEUS_PORT
from halo_cluster.roles.metrics.textseries import ACTIVE, FILE, RESTARTS, STALE_SECONDS
from tests.e2e.conftest import Lab
from tests.e2e.lab_metrics import answers
from tests.e2e.serving_lab import user
from tests.e2e.waits import until

WORKER, WORKER_ADDRESS = "node2", "192.168.100.2"
EXPORTER = "prometheus-node-exporter.service"
# NodeDown's `for: 1m`, then one rule evaluation (2 s in lab/serve.yml) and a margin
ALERT_SECONDS = 120


def query(lab: Lab, expr: str) -> list[dict]:
    (found,) = answers(lab, [expr], PROMETHEUS_PORT)
    return found


def wait_for(lab: Lab, expr: str, timeout: float, what: str) -> list[dict]:
    return until(lambda: query(lab, expr), timeout, f"{what}: {expr} returned nothing")[0]


def test_every_target_is_up_and_read_on_the_data_link(served: Lab) -> None:
    # a target is up once scraped: the first scrape comes within one interval of the deploy
    wait_for(served, "count(up) >= 3", 30, "every target scraped")
    targets = {
        (t["metric"]["job"], t["metric"]["instance"]): t["value"][1] for t in query(served, "up")
    }
    assert targets == {
        ("node", f"192.168.100.1:{NODE_EXPORTER_PORT}"): "1",
        ("node", f"{WORKER_ADDRESS}:{NODE_EXPORTER_PORT}"): "1",
        ("vllm", "192.168.100.1:8000"): "1",
    }
    listening = served.ssh(WORKER, f"ss -Hltn 'sport = :{NODE_EXPORTER_PORT}'")
    assert [line.split()[3] for line in listening.splitlines()] == [
        f"{WORKER_ADDRESS}:{NODE_EXPORTER_PORT}"
    ]
    image = user(served, "node1", "podman container inspect --format '{{.ImageName}}' "
                 "halo-prometheus").strip()  # fmt: skip
    assert image.startswith("quay.io/prometheus/prometheus@sha256:"), image


def test_a_stopped_node_exporter_is_down_and_fires_node_down(served: Lab) -> None:
    down = f'up{{job="node",instance="{WORKER_ADDRESS}:{NODE_EXPORTER_PORT}"}}'
    served.ssh(WORKER, f"systemctl stop {EXPORTER}")
    try:
        wait_for(served, f"{down} == 0", 20, "the stopped node_exporter seen down")
        started = time.monotonic()
        firing = wait_for(
            served, 'ALERTS{alertname="NodeDown",alertstate="firing"}', ALERT_SECONDS, "NodeDown"
        )
        print(f"NodeDown firing {time.monotonic() - started:.0f} s after up == 0")
        assert [a["metric"]["instance"] for a in firing] == [
            f"{WORKER_ADDRESS}:{NODE_EXPORTER_PORT}"
        ]
    finally:
        served.ssh(WORKER, f"systemctl start {EXPORTER}")
    wait_for(served, f"{down} == 1", 20, "node_exporter up again")


def test_every_node_reports_its_services_from_the_textfile_timer(served: Lab) -> None:
    # Ray's liveness is the node's own series (textseries.py), not Ray's exporter (minimal Ray
    # has none: docs/roles/metrics.md, "Not Ray's metrics"); vLLM's unit is the head's alone
    active = f'{ACTIVE.name}{{job="node"}}'
    wait_for(served, f"count({active}) >= 3", 90, "every node's services reported")
    states = {
        (s["metric"]["instance"].split(":")[0], s["metric"]["service"]): s["value"][1]
        for s in query(served, active)
    }
    assert states == {
        ("192.168.100.1", "halo-ray"): "1",
        ("192.168.100.1", "halo-vllm"): "1",
        (WORKER_ADDRESS, "halo-ray"): "1",
    }
    assert len(query(served, f'{RESTARTS.name}{{job="node"}}')) == 3
    # the timer writes the file every minute: never older than NodeSeriesStale's bound
    written = f'node_textfile_mtime_seconds{{job="node",file=~"(.*/)?{FILE}"}}'
    assert len(query(served, written)) == 2
    assert query(served, f"time() - {written} > {STALE_SECONDS}") == []
