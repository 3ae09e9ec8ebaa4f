"""What the lab's Prometheus can and cannot have, and its answers: the e2e test of every query
(test_metrics_queries.py) and the unit test comparing the dashboards with the stand-in
(tests/unit/test_grafana.py) read these.

The lab's nodes are containers on one machine: no amdgpu card (drm), no hwmon chip, no RDMA
device (infiniband) and, on this machine, no DMI table (/sys/class/dmi: the BIOS version), so
node_exporter has none of those series (NOT VERIFIED in the lab: their names are node_exporter's,
tests/unit/test_grafana.py); the stand-in vLLM serves vLLM 0.33.0's
families that the dashboards and alerts read (lab/standin/vllm_metrics.py), so none is expected
empty on its account."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

if TYPE_CHECKING:
    from tests.e2e.conftest import Lab

NO_DEVICE = ("node_drm_", "node_hwmon_", "node_infiniband_", "node_dmi_")
STANDIN_UNSERVED: frozenset[str] = frozenset()
HEAD = "192.168.100.1"


def lab_absent(name: str) -> bool:
    """Whether the lab cannot have a series of this name."""
    return name.startswith(NO_DEVICE) or name in STANDIN_UNSERVED


def answers(lab: Lab, exprs: list[str], port: int) -> list[list[dict]]:
    """The lab's Prometheus' answer to each instant query, asked on the head in one ssh."""
    url = f"http://{HEAD}:{port}/api/v1/query"
    curls = [
        f"curl -sf -m 10 -G {url} --data-urlencode {shlex.quote('query=' + expr)}; echo"
        for expr in exprs
    ]
    lines = lab.ssh("node1", "; ".join(curls)).splitlines()
    assert len(lines) == len(exprs), f"{len(exprs)} queries, {len(lines)} answers"
    found = []
    for expr, line in zip(exprs, lines, strict=True):
        answer = json.loads(line) if line else {"status": "no answer"}
        assert answer["status"] == "success", f"{expr}: {line}"
        found.append(answer["data"]["result"])
    return found


def complete(lab: Lab, count: int) -> None:
    """`count` short completions at once on the head's vLLM, answered before this returns."""
    body = json.dumps({"model": "facebook/opt-125m", "prompt": "hello", "max_tokens": 8})
    one = (
        f"curl -sf -m 60 -o /dev/null http://{HEAD}:8000/v1/completions "
        f"-H 'Content-Type: application/json' -d '{body}'"
    )
    lab.ssh("node1", " & ".join([one] * count) + " & wait")


LAB_SERVE = Path(__file__).resolve().parents[2] / "lab" / "serve.yml"
SCRAPE_SECONDS = float(yaml.safe_load(LAB_SERVE.read_text())["metrics"]["scrape_interval"])


def scraped_since(lab: Lab, moment: float, port: int, scrapes: int = 2) -> float:
    """Seconds until Prometheus has read vLLM `scrapes` times after `moment` (a time.time()):
    a rate() then has two samples of what happened before it. Within 15 scrape intervals."""
    from tests.e2e.waits import until  # a helper of the e2e tests, as this module is

    newest = f'timestamp(up{{job="vllm"}}) > {moment + (scrapes - 1) * SCRAPE_SECONDS:.3f}'

    def scraped() -> list[dict]:
        try:
            return answers(lab, [newest], port)[0]
        except (AssertionError, ValueError):  # Prometheus not answering yet: a restart's start
            return []

    return until(scraped, 15 * SCRAPE_SECONDS, f"{newest}: a vLLM scrape")[1]
