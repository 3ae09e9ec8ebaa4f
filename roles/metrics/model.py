"""The metrics role's typed values: the `metrics:` section as `Metrics`, with where Prometheus
listens and what it scrapes, derived once from the keys and the cluster, and the digests the
cluster's lock pins for its images (pins.py); the password file checked on the controller when
cluster.yml is loaded."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from halo_cluster.config import lock as locks
from halo_cluster.config.derive import resolve
from halo_cluster.config.filecheck import check_secret
from halo_cluster.config.model import Cluster, Problems
from halo_cluster.config.rules import image_digest, image_name
from halo_cluster.config.schema import section_type
from halo_cluster.config.serving import SERVICE_CONFIG
from halo_cluster.roles.metrics.schema import SECTION

PROMETHEUS_PORT = 9090
NODE_EXPORTER_PORT = 9100
# with listen: all, the Authorization header the head's own readers of Prometheus send (status's
# live rows, the serve role's watchdog), below the cluster user's home: 0600, outside the folder
# mounted into Prometheus' container (which needs only the hash)
AUTHORIZATION = f"{SERVICE_CONFIG}/prometheus-authorization"
IMAGES = ("metrics.image", "metrics.grafana_image")  # the keys the lock pins (lockschema.PINNED)

MetricsKeys = section_type("MetricsKeys", SECTION)


@dataclass(frozen=True)
class Metrics(MetricsKeys):  # type: ignore[misc,valid-type]
    """`cluster.metrics`: the keys, then what is derived from them (host data
    `halo_metrics_FIELD`)."""

    listen_address: str  # Prometheus' --web.listen-address
    url: str  # Prometheus as the head reaches it (its data address: either listen has it)
    exposed_port: int | None  # the port the head opens on its management side, if any
    vllm_target: str  # vLLM's API on the head's data address ("" when not serving)
    authorization: str  # AUTHORIZATION with listen: all, else "": no reader sends a password
    # {key: NAME@DIGEST} the lock pins for each image key that names a tag, the same tag as
    # the lock's (a key absent: resolved on the head, then recorded)
    locked: dict[str, str]


def derive(cluster: Cluster, problems: Problems, base_dir: Path) -> Metrics:
    names = MetricsKeys.__dataclass_fields__
    values = {name: cluster.settings[f"metrics.{name}"] for name in names}
    keys = replace(
        MetricsKeys(**values),
        password_file=resolve(values["password_file"], base_dir),
        grafana_password_file=resolve(values["grafana_password_file"], base_dir),
    )
    head = next((n for n in cluster.nodes if n.role == "head"), None)
    address = head.address if head else ""
    everywhere = keys.listen == "all"
    # vLLM answers on the head's data address with either serve.listen: its port, while serving
    serving, port = cluster.settings["serve.enabled"], cluster.settings["serve.port"]
    if keys.enabled and everywhere and not keys.password_file:
        problems.error("metrics.password_file", "required with metrics.listen: all")
    if keys.enabled and keys.grafana and not keys.grafana_password_file:
        problems.error("metrics.grafana_password_file", "required with metrics.grafana: true")
    return Metrics(
        **{name: getattr(keys, name) for name in names},
        listen_address=f"{'0.0.0.0' if everywhere else address}:{PROMETHEUS_PORT}",
        url=f"http://{address}:{PROMETHEUS_PORT}",
        exposed_port=PROMETHEUS_PORT if keys.enabled and everywhere else None,
        vllm_target=f"{address}:{port}" if serving else "",
        authorization=AUTHORIZATION if keys.enabled and everywhere else "",
        locked=_locked(cluster, base_dir) if keys.enabled else {},
    )


def _locked(cluster: Cluster, base_dir: Path) -> dict[str, str]:
    """The lock's pins for the configured tags. A lock with problems pins nothing here: the
    container role's derivation reads the same lock and says each problem, once."""
    found, _ = locks.read(locks.found(base_dir))
    if found is None:
        return {}
    pins = {}
    for key in IMAGES:
        reference = cluster.settings[key]
        digest = "" if image_digest(reference) else found.pinned(key, reference)
        if digest:
            pins[key] = f"{image_name(reference)}@{digest}"
    return pins


def prepare(cluster: Cluster, problems: Problems, base_dir: Path) -> None:
    metrics = cluster.metrics
    if metrics.enabled and metrics.password_file:
        check_secret("metrics.password_file", metrics.password_file, problems)
    if metrics.enabled and metrics.grafana and metrics.grafana_password_file:
        check_secret("metrics.grafana_password_file", metrics.grafana_password_file, problems)
