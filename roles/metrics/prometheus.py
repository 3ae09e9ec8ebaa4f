"""Prometheus on the head: a rootless quadlet of the cluster user, its image pinned by digest,
its config rendered from the cluster (every node's node_exporter, vLLM's /metrics on the head's
data address; not Ray's: docs/roles/metrics.md), the alert rules (alerts.py),
and with `metrics.listen: all` a bcrypt hash of the password in a 0600 web config, and the
Authorization header the head's own readers send (status, the watchdog) in a 0600 file."""

from __future__ import annotations

import base64
import re

import bcrypt  # paramiko's dependency, so pyinfra's: no package of its own
from pyinfra import host

from halo_cluster.config.serving import QUADLETS, SERVICE_CONFIG
from halo_cluster.node.image import ContainerImages, ResolvedImage
from halo_cluster.node.nodefiles import node_files
from halo_cluster.roles.metrics import alerts
from halo_cluster.roles.metrics.exporter import render
from halo_cluster.roles.metrics.facts import Units
from halo_cluster.roles.metrics.model import AUTHORIZATION, NODE_EXPORTER_PORT
from halo_cluster.roles.metrics.quadlet import Quadlet

SERVICE = "halo-prometheus"
FOLDER = f"{SERVICE_CONFIG}/metrics"  # mounted read-only as /etc/prometheus
SERIES = ".local/share/halo-cluster/prometheus"  # the TSDB, mounted as /prometheus
USER = "halo"  # the one basic-auth user of metrics.listen: all
# name -> (path below the user's home, mode, secret)
FILES = {
    "unit": (f"{QUADLETS}/{SERVICE}.container", "644", False),
    "config": (f"{FOLDER}/prometheus.yml", "644", False),
    "alerts": (f"{FOLDER}/{alerts.TARGET}", "644", False),
    "web": (f"{FOLDER}/web.yml", "600", True),
    "authorization": (AUTHORIZATION, "600", True),  # the head's readers' (model.py)
}
QUADLET = Quadlet(SERVICE, "Prometheus'", "metrics.image", FILES["unit"][0])
HASH_LINE = re.compile(rf"^  {USER}: (\S+)$", re.MULTILINE)


def paths(data) -> tuple[str, ...]:
    return tuple(f"~{data.halo_cluster_user}/{path}" for path, _, _ in FILES.values())


def reads(data) -> tuple[tuple[type, dict], ...]:
    if not wanted_here(data):
        return ()
    user = data.halo_cluster_user
    found: tuple[tuple[type, dict], ...] = (
        (Units, {"units": (SERVICE,), "user": user}),
        (ContainerImages, {"user": user, "containers": (SERVICE,)}),
    )
    if QUADLET.resolves(data):
        found += ((ResolvedImage, {"user": user, "reference": data.halo_metrics_image}),)
    return found


def wanted_here(data) -> bool:
    return bool(data.halo_metrics_enabled) and data.halo_role == "head"


def apply() -> None:
    # every node: a former head's Prometheus goes when the head moves
    QUADLET.converge(FILES, _wanted, wanted_here(host.data), "metrics off, or not wanted any more")


def _wanted(where: dict[str, str]) -> dict[str, str] | None:
    image = QUADLET.pinned()
    if image is None:
        return None
    data = host.data
    interval = data.halo_metrics_scrape_interval
    wanted = {
        "unit": render(
            "halo-prometheus.container.j2",
            node=data.halo_node,
            user=data.halo_cluster_user,
            image=image,
            reference=data.halo_metrics_image,
            digest=image.rpartition("@")[2],
            folder=FOLDER,
            series=SERIES,
            args=arguments(),
        ),
        "config": render(
            "prometheus.yml.j2",
            node=data.halo_node,
            interval=interval,
            timeout=min(interval, 10),
            alerts=f"/etc/prometheus/{alerts.TARGET}",
            nodes=scrape_nodes(),
            vllm=data.halo_metrics_vllm_target,
            node_exporter_port=NODE_EXPORTER_PORT,
        ),
        "alerts": alerts.render(alerts.configured(data)),
    }
    if data.halo_metrics_listen == "all":
        password = _password()
        wanted["web"] = _web_config(password, node_files(host).text(where["web"]))
        wanted["authorization"] = authorization_header(password)
    return wanted


def arguments() -> list[str]:
    """Prometheus' command line: every argument replaces the image's CMD, so its two are said
    again; nothing secret (the password's hash is in the web config file)."""
    data = host.data
    found = [
        "--config.file=/etc/prometheus/prometheus.yml",
        "--storage.tsdb.path=/prometheus",
        f"--storage.tsdb.retention.time={data.halo_metrics_retention_days}d",
        f"--storage.tsdb.retention.size={data.halo_metrics_retention_gib}GB",  # powers of 2
        f"--web.listen-address={data.halo_metrics_listen_address}",
    ]
    if data.halo_metrics_listen == "all":
        found.append("--web.config.file=/etc/prometheus/web.yml")
    return found


def scrape_nodes() -> list[tuple[str, str]]:
    """(node, data address) of every node, the head first."""
    data = host.data
    return [(data.halo_node, data.halo_data_address), *sorted(data.halo_peers.items())]


def _password() -> bytes:
    """The password as the controller's file holds it: its one line."""
    with open(host.data.halo_metrics_password_file, "rb") as stream:
        return stream.read().strip()


def authorization_header(password: bytes) -> str:
    """The header line basic auth takes (RFC 7617), as a file: curl reads it on its stdin
    (`-H @-`) and the watchdog adds it to its request, so neither a password nor any escaping of
    one (curl's config and netrc syntaxes each quote their own way) reaches a command line.
    Base64 hides nothing: the file is 0600 as the password's own."""
    token = base64.b64encode(USER.encode() + b":" + password).decode()
    return f"Authorization: Basic {token}\n"


def _web_config(password: bytes, current: str | None) -> str:
    """The web config with the password's bcrypt hash: the present one while it still matches
    the password file (a new salt every run would restart Prometheus every run)."""
    found = HASH_LINE.search(current or "")
    if found and bcrypt.checkpw(password, found.group(1).encode()):
        hashed = found.group(1)
    else:
        hashed = bcrypt.hashpw(password, bcrypt.gensalt()).decode()
    return render("web.yml.j2", user=USER, hashed=hashed)
