"""The metrics role's plans, shared by its plan tests (tests/plan/test_metrics.py) and the test
that runs the rendered files with the real programs (tests/unit/test_metrics_run.py)."""

from __future__ import annotations

from tests.plan.harness import Plan, plan
from tests.plan.nodes import HOME, serve_cluster, user_node

DROP_IN = "/etc/systemd/system/prometheus-node-exporter.service.d/halo-cluster.conf"
UNIT = f"{HOME}/.config/containers/systemd/halo-prometheus.container"
CONFIG = f"{HOME}/.config/halo-cluster/metrics/prometheus.yml"
WEB = f"{HOME}/.config/halo-cluster/metrics/web.yml"
ALERTS = f"{HOME}/.config/halo-cluster/metrics/alerts.yml"
# with listen: all, the header the head's own readers send (status, the watchdog)
AUTHORIZATION = f"{HOME}/.config/halo-cluster/prometheus-authorization"
ON = "metrics: {enabled: true, scrape_interval: 5}\n"
ALL = "metrics: {enabled: true, listen: all, password_file: pw}\n"
RUNNING = [
    "Id=prometheus-node-exporter.service",
    "ActiveState=active",
    "UnitFileState=enabled",
    "",
    "Id=halo-prometheus.service",
    "ActiveState=active",
    "UnitFileState=generated",
]


def metrics_plan(top: str, tmp_path, files=None, **node) -> Plan:
    (tmp_path / "key").write_text("sk-test\n")
    (tmp_path / "pw").write_text("prometheus-secret\n")
    cluster = serve_cluster(serve=", api_key_file: key", tmp_path=tmp_path, top=top)
    nodes = {n.name: user_node(files=dict(files or {}), **node) for n in cluster.nodes}
    return plan(cluster, nodes)
