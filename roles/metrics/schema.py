"""The metrics role's keys: whether the cluster is watched, how often, how long its series are
kept, where Prometheus listens and the password it then requires, and Prometheus' image."""

from __future__ import annotations

from halo_cluster.config import rules
from halo_cluster.config.schema import Field, variables
from halo_cluster.roles.metrics import alerts

DEFAULT_IMAGE = "quay.io/prometheus/prometheus:v3.5.0"
DEFAULT_GRAFANA_IMAGE = "docker.io/grafana/grafana:12.3.1"

SECTION: tuple[Field, ...] = (
    Field(
        "metrics",
        "mapping",
        {},
        "Node and vLLM metrics in Prometheus on the head (see `metrics.*` and "
        "docs/roles/metrics.md).",
    ),
    Field(
        "metrics.enabled",
        "boolean",
        False,
        "node_exporter on every node and Prometheus on the head; off by default (a second "
        "image from another registry, and a service on every node: docs/roles/metrics.md).",
    ),
    Field(
        "metrics.scrape_interval",
        "integer",
        15,
        "Seconds between two reads of every target (Prometheus' `scrape_interval`, also its "
        "rules' `evaluation_interval`): 1-300.",
        rule=rules.between(1, 300, " seconds"),
    ),
    Field(
        "metrics.retention_days",
        "integer",
        15,
        "Days of series kept (`--storage.tsdb.retention.time`): 1-3650; whichever of this and "
        "`metrics.retention_gib` is reached first drops the oldest.",
        rule=rules.between(1, 3650, " days"),
    ),
    Field(
        "metrics.retention_gib",
        "integer",
        10,
        "GiB of series kept on the head (`--storage.tsdb.retention.size`): 1-4096.",
        rule=rules.between(1, 4096, " GiB"),
    ),
    Field(
        "metrics.listen",
        "string",
        "data",
        "Where Prometheus listens: `data` (the head's data address only) or `all` (every "
        "address, the management side too: then `metrics.password_file` is required and the "
        "firewall role opens its port there).",
        ("data", "all"),
    ),
    Field(
        "metrics.password_file",
        "string",
        None,
        "A file on the controller holding Prometheus' password, one line (user `halo`); the "
        "head keeps its bcrypt hash in a 0600 file for Prometheus, the header its own readers "
        "send (status, the watchdog) in another, and with `metrics.grafana` a 0600 copy for "
        "Grafana's data source. Required with `metrics.listen: all`.",
        rule=rules.file_path,
    ),
    Field(
        "metrics.image",
        "string",
        DEFAULT_IMAGE,
        "Prometheus' image; the head resolves it to a digest and runs that digest.",
        rule=rules.image_reference,
    ),
    Field(
        "metrics.grafana",
        "boolean",
        False,
        "Grafana on the head too, with the cluster's dashboard and vLLM's, on the head's data "
        "address (port 3000); requires `metrics.grafana_password_file`.",
    ),
    Field(
        "metrics.grafana_password_file",
        "string",
        None,
        "A file on the controller holding Grafana's admin password, one line (user `admin`); "
        "the head keeps a 0600 copy Grafana reads at its first start. Required with "
        "`metrics.grafana`.",
        rule=rules.file_path,
    ),
    Field(
        "metrics.grafana_image",
        "string",
        DEFAULT_GRAFANA_IMAGE,
        "Grafana's image; the head resolves it to a digest and runs that digest.",
        rule=rules.image_reference,
    ),
    *alerts.fields(),  # the alert rules' bounds (roles/metrics/alerts.py)
)
# host data it reads beyond its section: the cluster section's, what the serve role derives
READS = (
    "halo_cluster_user",
    "halo_role",
    "halo_node",
    "halo_data_address",
    "halo_network_mtu",  # the data link's MTU as the network role derives it (textfile.py)
    "halo_head_address",
    "halo_peers",
    # what model.py derives from the section (`Metrics`)
    "halo_metrics_listen_address",
    "halo_metrics_vllm_target",
    "halo_metrics_url",  # Grafana's data source
    "halo_metrics_locked",  # the lock's pins of the configured tags (pins.py)
    "halo_container_lock",  # the lock the head records a resolved tag in
)
VARIABLES = variables(SECTION, READS)
