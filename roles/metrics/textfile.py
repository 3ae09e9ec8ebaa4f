"""The metrics role's own series on every node, for node_exporter's textfile collector (its
folder: exporter.TEXTFILES; the series declared in textseries.py): `halo_data_link_mtu_bytes
{device}`, the data interface at the MTU network.mtu sets; `halo_image_digest_info{container,
digest}`, the image digest each serving container runs; `halo_service_active{service}` and
`halo_service_restarts_total{service}`, each serving service the node runs (its quadlet is
there) active or not and its unit's NRestarts. node_exporter's systemd collector cannot give
these: it reads PID 1's manager, not the cluster user's. A root timer writes them every minute
(a container restarted on another image shows within a minute, not at the next deploy); the
alerts DataLinkMtuChanged, NodeImageDigestMismatch, RayDown, ServiceRestarting and
NodeSeriesStale read them (alerts.py). Off, the timer and its files go."""

from __future__ import annotations

import shlex

from pyinfra import host
from pyinfra.operations import server

from halo_cluster.config.serving import QUADLETS, SERVING_CONTAINERS
from halo_cluster.node.nodefiles import node_files
from halo_cluster.node.operations import text_file
from halo_cluster.roles.metrics import textseries
from halo_cluster.roles.metrics.exporter import TEXTFILES, render
from halo_cluster.roles.metrics.textseries import FILE, SECONDS

UNIT = "halo-metrics-textfile"
SCRIPT = f"/usr/local/libexec/{UNIT}"
# name -> (path, template, mode)
FILES = {
    "script": (SCRIPT, f"{UNIT}.sh.j2", "755"),
    "service": (f"/etc/systemd/system/{UNIT}.service", f"{UNIT}.service.j2", "644"),
    "timer": (f"/etc/systemd/system/{UNIT}.timer", f"{UNIT}.timer.j2", "644"),
}
SERIES = f"{TEXTFILES}/{FILE}"  # the script's output
RAY, _ = SERVING_CONTAINERS  # active only once its raylet runs (ray-start.sh waits for the head)


def paths(data) -> tuple[str, ...]:
    return (*(path for path, _, _ in FILES.values()), SERIES)


def apply(interface: str | None) -> None:
    """The timer and its files with metrics on (the data interface as found), else none."""
    files = node_files(host)
    data = host.data
    if not data.halo_metrics_enabled or not interface:
        present = [p for p in paths(data) if files.exists(p)]
        if present:
            _remove(present)
        return
    user = data.halo_cluster_user
    values = {
        "node": data.halo_node,
        "folder": TEXTFILES,
        "user": user,
        "interface": interface,
        "mtu": data.halo_network_mtu,
        "containers": list(SERVING_CONTAINERS),
        "ray": RAY,
        # a service the node runs has its quadlet here (serve/files.py's UNITS)
        "quadlets": f"{files.home(user) or f'/home/{user}'}/{QUADLETS}",
        "series": textseries.SERIES,
        "file": FILE,
        "script": SCRIPT,
        "seconds": SECONDS,
    }
    changed = False
    for name, (path, template, mode) in FILES.items():
        text = render(template, **values)
        changed = files.differs(path, text, mode) or changed
        text_file(name=f"The metrics role's {name} {path}", path=path, text=text, mode=mode)
    if changed or not files.exists(SERIES):
        server.shell(
            name="Write the node's own series now and every minute (halo-metrics-textfile)",
            # the first file now: the alerts need it before the timer's first run
            commands=[
                "systemctl daemon-reload",
                f"systemctl enable --now {UNIT}.timer",
                f"systemctl start {UNIT}.service",
            ],
        )


def _remove(present: list[str]) -> None:
    server.shell(
        name="Stop and remove the node's own series (metrics off)",
        commands=[
            f"systemctl disable --now {UNIT}.timer 2>/dev/null || true",
            f"rm -f {' '.join(shlex.quote(p) for p in present)}",
            "systemctl daemon-reload",
        ],
    )
