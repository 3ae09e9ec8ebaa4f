"""A cluster whose metrics are on, for status's tests: the metrics role's derived value as
status reads it (`cluster.metrics`: `enabled`, and `url`, Prometheus on the head's data address),
without its keys in the schema the tests load."""

from __future__ import annotations

from dataclasses import dataclass, replace

from halo_cluster.config.model import Cluster


@dataclass(frozen=True)
class Metrics:
    enabled: bool
    url: str


def with_metrics(cluster: Cluster) -> Cluster:
    url = f"http://{cluster.head.address}:9090"
    return replace(cluster, derived=cluster.derived | {"metrics": Metrics(True, url)})
