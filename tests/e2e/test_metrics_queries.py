"""Every dashboard panel's query and every alert rule's metric asked of the serving lab's
Prometheus after a `halo-cluster bench` run (issue 37 item 8): a panel that answers nothing is
named. What the lab cannot have is expected empty, and said (tests/e2e/lab_metrics.py)."""

from __future__ import annotations

import time

from halo_cluster.roles.metrics.model import PROMETHEUS_PORT
from halo_cluster.roles.metrics.queries import alert_queries, dashboard_queries, metric_names
from tests.e2e.conftest import Lab, failure
from tests.e2e.helpers_cluster import HALO_CLUSTER, run
from tests.e2e.lab_metrics import answers, lab_absent, scraped_since
from tests.e2e.serving_lab import SERVE


def test_every_panel_and_alert_reads_series_from_the_labs_prometheus(served: Lab) -> None:
    # vLLM read once before the run (a deploy or a restore may have just started Prometheus)
    scraped_since(served, time.time(), PROMETHEUS_PORT, scrapes=1)
    config = served.config("reboot: if-needed\n" + SERVE)
    bench = run([HALO_CLUSTER, "bench", "--config", str(config)], config)  # lab/serve.yml's
    # 3: slower than an earlier run of this configuration (the stand-in's numbers move with the
    # machine's load): the verdict is not what this test reads, the load the run put on vLLM is
    assert bench.returncode in (0, 3), failure(bench)
    scraped_since(served, time.time(), PROMETHEUS_PORT)
    panels = dashboard_queries()
    # an alert's expression is empty while the cluster is well: each series it reads is not
    series = sorted(
        {(q.title, name) for q in alert_queries() for name in metric_names(q.expr)}
        - {(q.title, "ALERTS") for q in alert_queries()}
    )
    asked = [q for q in panels if not any(map(lab_absent, metric_names(q.expr)))]
    read = [(title, name) for title, name in series if not lab_absent(name)]
    found = answers(served, [q.concrete() for q in asked] + [n for _, n in read], PROMETHEUS_PORT)
    of_panels, of_alerts = found[: len(asked)], found[len(asked) :]
    empty = [
        f"{q.source}: {q.title}: {q.concrete()}"
        for q, f in zip(asked, of_panels, strict=True)
        if not f
    ]
    empty += [f"alerts.yml: {t}: {n}" for (t, n), f in zip(read, of_alerts, strict=True) if not f]
    unasked = [f"{q.source}: {q.title}" for q in panels if q not in asked]
    print(f"not asked, the lab has none of their series (NOT VERIFIED): {unasked}")
    assert empty == [], "\n".join(empty)
