"""Prometheus on the head: a rootless quadlet of the cluster user, its image pinned by digest,
its config rendered from the cluster (every node's node_exporter, vLLM's /metrics on the head's
data address; not Ray's: docs/roles/metrics.md), the alert rules (alerts.py),
and with `metrics.listen: all` a bcrypt hash of the password in a 0600 web config."""

from __future__ import annotations

import re
import shlex

import bcrypt  # paramiko's dependency, so pyinfra's: no package of its own
from pyinfra import host, logger
from pyinfra.operations import server

from halo_cluster.config.rules import image_digest, image_name
from halo_cluster.config.serving import QUADLETS, SERVICE_CONFIG
from halo_cluster.node.facts import as_user
from halo_cluster.node.image import ContainerImages, ResolvedImage
from halo_cluster.node.nodefiles import cached, node_files
from halo_cluster.node.operations import text_file
from halo_cluster.node.report import fail
from halo_cluster.roles.metrics import alerts
from halo_cluster.roles.metrics.exporter import render
from halo_cluster.roles.metrics.facts import Units
from halo_cluster.roles.metrics.model import NODE_EXPORTER_PORT

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
}
RESOLVED_FROM = re.compile(r"^# image: (\S+) resolved to (sha256:[0-9a-f]{64})$", re.MULTILINE)
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
    if not image_digest(data.halo_metrics_image):
        found += ((ResolvedImage, {"user": user, "reference": data.halo_metrics_image}),)
    return found


def wanted_here(data) -> bool:
    return bool(data.halo_metrics_enabled) and data.halo_role == "head"


def apply() -> None:
    user = host.data.halo_cluster_user
    files = node_files(host)
    home = files.home(user) or f"/home/{user}"
    where = {name: f"{home}/{path}" for name, (path, _, _) in FILES.items()}
    # every node: a former head's Prometheus goes when the head moves
    wanted = _wanted(where) if wanted_here(host.data) else {}
    if wanted is None:
        return
    _remove(user, [where[n] for n in where if n not in wanted and files.exists(where[n])])
    changed = False
    for name, text in wanted.items():
        _, mode, secret = FILES[name]
        changed = files.differs(where[name], text, mode) or changed
        text_file(
            name=f"Prometheus' {where[name]}",
            path=where[name],
            text=text,
            mode=mode,
            owner=user,
            secret=secret,
        )
    if wanted:
        _start(user, changed, files.differs(where["unit"], wanted["unit"], "644"))


def pinned() -> str | None:
    """`NAME@sha256:...` Prometheus runs: as written when the key has a digest; else the digest
    the quadlet records for the same reference (a converged head asks no registry to stay
    where it is); else the head's resolve now."""
    reference = host.data.halo_metrics_image
    if image_digest(reference):
        return reference
    current = node_files(host).text(_unit_path()) or ""
    found = RESOLVED_FROM.search(current)
    if found and found.group(1) == reference:
        return f"{image_name(reference)}@{found.group(2)}"
    resolved = cached(host, ResolvedImage, user=host.data.halo_cluster_user, reference=reference)
    if resolved.digest:
        return f"{image_name(reference)}@{resolved.digest}"
    if resolved.skopeo_missing:
        # a fresh head: the packages role installs skopeo in this run, after the reads
        logger.warning(
            f"{host.print_prefix}Prometheus starts on the next run: skopeo was not installed "
            f"when {reference} was to be resolved"
        )
        return None
    fail(host, f"metrics.image: {reference} could not be resolved to a digest: {resolved.error}")
    return None


def _unit_path() -> str:
    user = host.data.halo_cluster_user
    return f"{node_files(host).home(user) or f'/home/{user}'}/{FILES['unit'][0]}"


def _wanted(where: dict[str, str]) -> dict[str, str] | None:
    image = pinned()
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
        wanted["web"] = _web_config(node_files(host).text(where["web"]))
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


def _web_config(current: str | None) -> str:
    """The web config with the password's bcrypt hash: the present one while it still matches
    the password file (a new salt every run would restart Prometheus every run)."""
    with open(host.data.halo_metrics_password_file, "rb") as stream:
        password = stream.read().strip()
    found = HASH_LINE.search(current or "")
    if found and bcrypt.checkpw(password, found.group(1).encode()):
        hashed = found.group(1)
    else:
        hashed = bcrypt.hashpw(password, bcrypt.gensalt()).decode()
    return render("web.yml.j2", user=USER, hashed=hashed)


def _remove(user: str, present: list[str]) -> None:
    if not present:
        return
    stop = as_user(user, f"systemctl --user stop {SERVICE}.service") + " 2>/dev/null || true"
    reload = as_user(user, "systemctl --user daemon-reload")
    server.shell(
        name="Stop and remove Prometheus' files (metrics off, or not wanted any more)",
        commands=[stop, f"rm -f {' '.join(shlex.quote(p) for p in present)}", reload],
    )


def _start(user: str, changed: bool, unit_changed: bool) -> None:
    """Start Prometheus, or restart it when its files changed or it runs another image."""
    state = cached(host, Units, units=(SERVICE,), user=user).get(SERVICE, {})
    running = cached(host, ContainerImages, user=user, containers=(SERVICE,)).get(SERVICE)
    other = bool(running and running["reference"] != pinned())
    up = state.get("active") in ("active", "activating")
    verb = "restart" if up and (changed or other) else None if up else "start"
    commands = [as_user(user, "systemctl --user daemon-reload")] if unit_changed else []
    if verb:
        commands.append(as_user(user, f"systemctl --user {verb} {SERVICE}.service"))
    if commands:
        server.shell(name=f"{(verb or 'reload').capitalize()} {SERVICE}", commands=commands)
