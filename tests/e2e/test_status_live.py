"""`halo-cluster status` live on the serving lab (issue 37 item 6): after a few completions, the
head's Prometheus (lab/serve.yml: metrics on, a scrape every 2 s) answers every query of
status/live.py, read through status's one read of the head; the lab has no amdgpu card, so GPU
busy and GTT are "no data" there (NOT VERIFIED: their names are node_exporter's drm
collector's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from halo_cluster.roles.metrics.model import PROMETHEUS_PORT
from tests.e2e.conftest import Lab
from tests.e2e.lab_metrics import scraped_since
from tests.e2e.serving_lab import HEAD, SERVE

HALO_CLUSTER = str(Path(sys.executable).parent / "halo-cluster")
COMPLETIONS = 4


def status(config: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [HALO_CLUSTER, "status", *args],
        env=dict(os.environ, CLUSTER_CONFIG=str(config)),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_status_shows_the_last_minutes_from_prometheus(served: Lab) -> None:
    config = served.config("reboot: if-needed\n" + SERVE)
    body = json.dumps({"model": "facebook/opt-125m", "prompt": "hello", "max_tokens": 8})
    one = (
        f"curl -sf -m 60 -o /dev/null http://{HEAD}:8000/v1/completions "
        f"-H 'Content-Type: application/json' -d '{body}'"
    )
    # a sample of vLLM's counters from before the completions (a restored lab's Prometheus has
    # none within the window yet): rate() then sees them rise
    scraped_since(served, time.time(), PROMETHEUS_PORT, scrapes=1)
    served.ssh("node1", " & ".join([one] * COMPLETIONS) + " & wait")
    scraped_since(served, time.time(), PROMETHEUS_PORT)
    started = time.monotonic()
    found = status(config, "--json")
    took = time.monotonic() - started
    assert found.returncode == 0, found.stdout + found.stderr
    head = next(n for n in json.loads(found.stdout)["nodes"] if n["role"] == "head")
    live = head["live"]
    assert live["state"] == "up" and live["errors"] == [], live
    assert live["requests_running"] is not None and live["requests_waiting"] is not None
    assert live["tokens_per_s"] > 0, live
    assert live["ttft_p50_s"] is not None and live["ttft_p95_s"] is not None, live
    for name, node in live["nodes"].items():
        assert node["memory_available_bytes"] > 0, (name, node)
        assert node["gpu_busy_percent"] is None and node["gtt_used_bytes"] is None  # no drm card
    text = status(config)
    assert text.returncode == 0, text.stdout + text.stderr
    lines = text.stdout.splitlines()
    assert any(line.startswith("live (Prometheus http://") for line in lines), text.stdout
    assert "  node2: GPU busy no data, memory available " in text.stdout, text.stdout
    print(f"status --json took {took:.1f} s")
