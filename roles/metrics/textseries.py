"""The metrics role's own textfile series, declared once: each name, type and HELP line, which
the node's script writes (templates/metrics/halo-metrics-textfile.sh.j2, textfile.py), the alert
rules read (alerts.yml.j2) and queries.py declares; the file they go into, how often the timer
writes it, and how old it may grow before the rules call it stale. No pyinfra here: the rules
and the query checks read it without the role's operations."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Series:
    name: str
    kind: str  # Prometheus' TYPE: gauge or counter
    help: str  # one line, no quote


MTU = Series("halo_data_link_mtu_bytes", "gauge", "The MTU network.mtu sets on the data interface.")
DIGEST = Series("halo_image_digest_info", "gauge", "The image digest each serving container runs.")
ACTIVE = Series(
    "halo_service_active",
    "gauge",
    "1 when the serving service's user unit is active (halo-ray: and a raylet of the cluster "
    "user runs), else 0; no series for a service the node does not run.",
)
RESTARTS = Series(
    "halo_service_restarts_total",
    "counter",
    "systemd's automatic restarts of the serving service's user unit (NRestarts); 0 again at "
    "the next start after a stop.",
)
SERIES = {"mtu": MTU, "digest": DIGEST, "active": ACTIVE, "restarts": RESTARTS}
FILE = "halo-cluster.prom"  # in node_exporter's textfile folder (exporter.TEXTFILES)
SECONDS = 60  # the timer's period
STALE_SECONDS = 5 * SECONDS  # older than five periods: the timer no longer writes it
