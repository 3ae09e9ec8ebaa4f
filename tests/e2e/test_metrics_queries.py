"""Every dashboard panel's query and every alert rule's metric asked of the serving lab's
Prometheus after a few completions (issue 37 item 8): a panel that answers nothing is named.
What the lab cannot have is expected empty, and said (tests/e2e/lab_metrics.py)."""

from __future__ import annotations

import json
import time

from halo_cluster.roles.metrics.model import PROMETHEUS_PORT
from halo_cluster.roles.metrics.queries import alert_queries, dashboard_queries, metric_names
from tests.e2e.conftest import Lab
from tests.e2e.lab_metrics import HEAD, lab_absent, query

COMPLETIONS = 8
# two scrapes and rule evaluations after the last completion, and a rate()'s two samples
SETTLE_SECONDS = 45


def complete(lab: Lab, count: int) -> None:
    """`count` short completions at once, answered before this returns."""
    body = json.dumps({"model": "facebook/opt-125m", "prompt": "hello", "max_tokens": 8})
    one = (
        f"curl -sf -m 60 -o /dev/null http://{HEAD}:8000/v1/completions "
        f"-H 'Content-Type: application/json' -d '{body}'"
    )
    lab.ssh("node1", " & ".join([one] * count) + " & wait")


def test_every_panel_and_alert_reads_series_from_the_labs_prometheus(served: Lab) -> None:
    assert query(served, "up", PROMETHEUS_PORT), "the lab's Prometheus has no target"
    complete(served, COMPLETIONS)
    time.sleep(SETTLE_SECONDS)
    empty, expected_empty = [], []
    for q in dashboard_queries():
        absent = any(lab_absent(name) for name in metric_names(q.expr))
        found = bool(query(served, q.concrete(), PROMETHEUS_PORT))
        if absent:
            expected_empty.append(f"{q.source}: {q.title}")
        elif not found:
            empty.append(f"{q.source}: {q.title}: {q.concrete()}")
    # an alert's expression is empty while the cluster is well: each series it reads is not
    for q in alert_queries():
        for name in sorted(metric_names(q.expr)):
            if name == "ALERTS" or lab_absent(name):
                continue
            if not query(served, name, PROMETHEUS_PORT):
                empty.append(f"{q.source}: {q.title}: {name}")
    print(f"expected empty in the lab (NOT VERIFIED): {expected_empty}")
    assert empty == [], "\n".join(empty)
