"""`halo-cluster bench` on the serving lab (issue 26, design step 5): the image's own client (the
stand-in's `vllm bench serve`) run in the head's halo-vllm container; the run's key holds the
digest podman reports for that container; a second run compares (exit 0, with its deltas); the
API key is never in a process's argv on the head while it runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from halo_cluster.config import state
from lab import cli
from tests.e2e.conftest import ROOT, Lab
from tests.e2e.serving_lab import SERVE, user, wait_serving

pytestmark = pytest.mark.serving
HALO_CLUSTER = str(Path(sys.executable).parent / "halo-cluster")
# the state folder of the lab's configs (lab.config writes them beside cluster.yml)
INDEX = state.folder(cli.LAB_DIR) / "reports" / "bench" / "index.jsonl"
KEY = "sk-lab-bench-4b1d9e"
# the stand-in's numbers move with the machine's load: the comparison's verdict is not what this
# test asserts, the comparison itself is (a regression is test_upgrade.py's slow build)
WIDE = SERVE.replace("bench:\n", "bench:\n  tolerance: 90\n", 1)
# every process's argv on the head, NUL-separated as the kernel keeps them
CMDLINES = "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '; echo"


def bench(config: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, CLUSTER_CONFIG=str(config))
    argv = [HALO_CLUSTER, "bench", *args]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def watch_argv(lab: Lab, stop: threading.Event, seen: list[str]) -> None:
    """The head's /proc/*/cmdline every 0.2 s until `stop`."""
    while not stop.is_set():
        seen.append(lab.ssh("node1", CMDLINES, check=False))
        stop.wait(0.2)


def test_a_run_is_keyed_by_what_served_and_a_second_one_compares(serving: Lab) -> None:
    lab = serving
    key = cli.LAB_DIR / "api-key"
    key.write_text(KEY + "\n")
    extra = WIDE + f"  api_key_file: {key}\n"
    lab.ensure_converged(extra)
    wait_serving(lab)
    config = lab.config("reboot: if-needed\n" + extra)
    before = INDEX.read_text().splitlines() if INDEX.is_file() else []

    stop, seen = threading.Event(), []
    watcher = threading.Thread(target=watch_argv, args=(lab, stop, seen), daemon=True)
    watcher.start()
    try:
        first = bench(config)
    finally:
        stop.set()
        watcher.join()
    assert first.returncode == 0, first.stdout + first.stderr
    assert "bench: concurrency 4: 8 prompts (64 in / 16 out)" in first.stdout
    assert "lab stand-in" in first.stdout
    assert len(seen) > 3 and any("bench serve" in argv for argv in seen), "the watch saw no run"
    assert not [argv for argv in seen if KEY in argv], "the API key was in a process's argv"

    lines = [json.loads(line) for line in INDEX.read_text().splitlines()[len(before) :]]
    (run,) = lines
    running = user(lab, "node1", "podman container inspect --format '{{.ImageName}}' halo-vllm")
    assert run["image_digest"] == running.strip().partition("@")[2]
    assert run["key"]["image_digest"] == run["image_digest"] and run["lab"]
    assert set(run["levels"]) == {"1", "4"}
    assert all(level["failed"] == 0 for level in run["levels"].values())
    assert all(level["output_throughput"] > 0 for level in run["levels"].values())
    kept = json.loads((INDEX.parent / run["file"]).read_text())
    assert kept["results"]["4"]["completed"] == 8 and kept["results"]["4"]["halo_run"]
    assert "Lab stand-in, not a model's numbers" in (INDEX.parent / "report.md").read_text()

    second = bench(config)
    assert second.returncode == 0, second.stdout + second.stderr
    compared = bench(config, "--compare")
    assert compared.returncode == 0, compared.stdout + compared.stderr
    assert "changed: nothing in the key" in compared.stdout, compared.stdout
    assert "change" in compared.stdout and " %" in compared.stdout  # the deltas per level
    history = lab.ssh("node1", "cat ~vllm/.local/state/halo-cluster/history.jsonl")
    assert history.count('"event":"bench"') >= 2

    lab.ensure_converged(SERVE)
    wait_serving(lab)
