"""Grafana on the head, with `metrics.grafana`: a rootless quadlet of the cluster user, its image
pinned by digest, provisioned with the head's Prometheus as its data source and three dashboards
(templates/metrics/grafana/: the cluster's own, and vLLM's two from its examples); its admin
password a 0600 copy of the controller's `metrics.grafana_password_file`, read by the image's
run.sh through GF_SECURITY_ADMIN_PASSWORD__FILE (never on a command line). Listens on the head's
data address only (the firewall opens nothing for it: a workstation reaches it through the head,
docs/roles/metrics.md). Off, its files go (its data folder stays)."""

from __future__ import annotations

from pyinfra import host

from halo_cluster.config.serving import QUADLETS, SERVICE_CONFIG
from halo_cluster.node.image import ContainerImages, ResolvedImage
from halo_cluster.roles.metrics.exporter import render
from halo_cluster.roles.metrics.facts import Units
from halo_cluster.roles.metrics.prometheus import USER as PROMETHEUS_USER
from halo_cluster.roles.metrics.quadlet import Quadlet
from halo_cluster.roles.metrics.queries import dashboards

SERVICE = "halo-grafana"
PORT = 3000
DATASOURCE_UID = "prometheus"  # the uid the dashboards name (vLLM's pick it as their default)
FOLDER = f"{SERVICE_CONFIG}/grafana"
DATA = ".local/share/halo-cluster/grafana"  # Grafana's database, mounted as /var/lib/grafana
DASHBOARDS = "/etc/halo-cluster/dashboards"  # in the container
SECRETS = "/run/secrets/halo"  # in the container


def files() -> dict[str, tuple[str, str, bool]]:
    """name -> (path below the user's home, mode, secret) of every file Grafana may have."""
    found = {
        "unit": (f"{QUADLETS}/{SERVICE}.container", "644", False),
        "datasource": (f"{FOLDER}/datasources/prometheus.yml", "644", False),
        "provider": (f"{FOLDER}/providers/halo-cluster.yml", "644", False),
        "admin_password": (f"{FOLDER}/secrets/admin-password", "600", True),
        "prometheus_password": (f"{FOLDER}/secrets/prometheus-password", "600", True),
    }
    for name in dashboards():
        found[f"dashboard {name}"] = (f"{FOLDER}/dashboards/{name}", "644", False)
    return found


QUADLET = Quadlet(SERVICE, "Grafana's", "metrics.grafana_image", files()["unit"][0])


def paths(data) -> tuple[str, ...]:
    return tuple(f"~{data.halo_cluster_user}/{path}" for path, _, _ in files().values())


def wanted_here(data) -> bool:
    return bool(data.halo_metrics_enabled and data.halo_metrics_grafana) and (
        data.halo_role == "head"
    )


def reads(data) -> tuple[tuple[type, dict], ...]:
    user = data.halo_cluster_user
    found: tuple[tuple[type, dict], ...] = (
        (Units, {"units": (SERVICE,), "user": user}),
        (ContainerImages, {"user": user, "containers": (SERVICE,)}),
    )
    if wanted_here(data) and QUADLET.resolves(data):
        found += ((ResolvedImage, {"user": user, "reference": data.halo_metrics_grafana_image}),)
    return found


def apply() -> None:
    # every node: a former head's Grafana goes when the head moves or metrics.grafana goes off
    off = "metrics.grafana off, or not wanted any more"
    QUADLET.converge(files(), lambda _: _wanted(), wanted_here(host.data), off)


def _wanted() -> dict[str, str] | None:
    image = QUADLET.pinned()
    if image is None:
        return None
    data = host.data
    everywhere = data.halo_metrics_listen == "all"
    wanted = {
        "unit": render(
            "halo-grafana.container.j2",
            node=data.halo_node,
            user=data.halo_cluster_user,
            image=image,
            reference=data.halo_metrics_grafana_image,
            digest=image.rpartition("@")[2],
            folder=FOLDER,
            data=DATA,
            dashboards=DASHBOARDS,
            secrets=SECRETS,
            address=data.halo_data_address,
            port=PORT,
        ),
        "datasource": render(
            "grafana/datasource.yml.j2",
            uid=DATASOURCE_UID,
            url=data.halo_metrics_url,
            user=PROMETHEUS_USER if everywhere else None,
            password_file=f"{SECRETS}/prometheus-password",
        ),
        "provider": render("grafana/dashboards.yml.j2", path=DASHBOARDS),
        "admin_password": _secret(data.halo_metrics_grafana_password_file),
        **{f"dashboard {name}": text for name, text in dashboards().items()},
    }
    if everywhere:
        wanted["prometheus_password"] = _secret(data.halo_metrics_password_file)
    return wanted


def _secret(path: str) -> str:
    """A password file of the controller's as the head keeps it: its first line."""
    with open(path, encoding="utf-8") as stream:
        return stream.read().strip() + "\n"
