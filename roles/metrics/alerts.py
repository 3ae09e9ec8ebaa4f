"""The cluster's Prometheus alert rules (templates/metrics/alerts.yml.j2), rendered with the bounds
a user may change (`metrics.alert_*`). The rules' names, bounds and runbooks: docs/roles/metrics.md,
"Alerts"; every rule is tested firing and not firing with `promtool test rules`
(tests/unit/test_alert_rules.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from halo_cluster.config import rules
from halo_cluster.config.schema import Field, host_name
from halo_cluster.config.serving import SERVING_CONTAINERS
from halo_cluster.node.render import templates
from halo_cluster.roles.metrics import textseries

TEMPLATE = "alerts.yml.j2"
TARGET = "alerts.yml"  # beside prometheus.yml, in its `rule_files`
PREFIX = "metrics.alert_"  # a bound's key: metrics.alert_KEY


@dataclass(frozen=True)
class Bound:
    """A bound of the rules a user may want to move: `metrics.alert_KEY`."""

    key: str
    default: int
    high: int  # the largest value the key takes
    unit: str
    doc: str


BOUNDS = (
    Bound(
        "memory_available_gib",
        4,
        4096,
        " GiB",
        "NodeMemoryAvailableLow fires when a node's MemAvailable stays under this many GiB for "
        "2 minutes (unified memory: the GPU's allocations count here too).",
    ),
    Bound(
        "temperature_celsius",
        90,
        150,
        " °C",
        "NodeTemperatureHigh fires when a hwmon sensor stays above this for 5 minutes.",
    ),
    Bound(
        "kv_cache_percent",
        95,
        100,
        "%",
        "VllmKvCacheNearlyFull fires when vLLM's KV cache use stays above this percentage for "
        "5 minutes.",
    ),
)
DEFAULTS = {bound.key: bound.default for bound in BOUNDS}


def fields() -> tuple[Field, ...]:
    """The bounds as schema keys, for the metrics role's section (roles/metrics/schema.py)."""
    return tuple(
        Field(
            f"{PREFIX}{b.key}",
            "integer",
            b.default,
            f"{b.doc} 1-{b.high}.",
            rule=rules.between(1, b.high, b.unit),
        )
        for b in BOUNDS
    )


def configured(data: Any) -> dict[str, int]:
    """The bounds as the config sets them: the host data `halo_metrics_alert_KEY`."""
    return {b.key: getattr(data, host_name(f"{PREFIX}{b.key}")) for b in BOUNDS}


def render(bounds: dict[str, Any] | None = None) -> str:
    """alerts.yml: the bounds given (`configured`), else the defaults; the textfile series by
    their declared names (textseries.py)."""
    fixed = {
        "series": textseries.SERIES,
        "file": textseries.FILE,
        "stale_seconds": textseries.STALE_SECONDS,
        "ray": SERVING_CONTAINERS[0],
    }
    return templates(__package__ or "")(TEMPLATE, **{**DEFAULTS, **(bounds or {}), **fixed})
