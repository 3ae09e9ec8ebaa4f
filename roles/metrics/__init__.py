"""Metrics: node_exporter on every node (exporter.py) and Prometheus on the head
(prometheus.py), with `metrics.enabled`; off, both are stopped and their files removed (the
head's series stay in the cluster user's ~/.local/share/halo-cluster/prometheus).

After the serve role: Prometheus scrapes the vLLM the deploy has just (re)started, and a
metrics failure never holds serving back."""

from __future__ import annotations

from pyinfra.api import deploy

from halo_cluster.node.context import NodeContext
from halo_cluster.roles.metrics import exporter, grafana, prometheus, textfile

ORDER = 96
PACKAGES = ("node-exporter",)  # Fedora's node_exporter (formerly golang-github-...-node-exporter)


def paths(data) -> tuple[str, ...]:
    found = (*exporter.paths(data), *textfile.paths(data), *prometheus.paths(data))
    return (*found, *grafana.paths(data))


def reads(data) -> tuple[tuple[type, dict], ...]:
    return (*exporter.reads(data), *prometheus.reads(data), *grafana.reads(data))


@deploy("Metrics")
def apply(node: NodeContext) -> None:
    exporter.apply()
    textfile.apply(node.data_interface)  # the alerts' own series (textfile.py)
    prometheus.apply()
    grafana.apply()  # with metrics.grafana (grafana.py)
