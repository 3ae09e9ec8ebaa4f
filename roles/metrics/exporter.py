"""node_exporter on every node, from Fedora's `node-exporter` package: its unit
`prometheus-node-exporter.service` given a drop-in that resets `ExecStart=` (so the deploy does
not depend on the variable the package's `/etc/default/prometheus-node-exporter` sets), listening
on the node's data address only, with the collectors this hardware needs."""

from __future__ import annotations

from pyinfra import host
from pyinfra.operations import server

from halo_cluster.node.nodefiles import cached, node_files
from halo_cluster.node.operations import text_file
from halo_cluster.node.render import templates
from halo_cluster.roles.metrics.facts import Units
from halo_cluster.roles.metrics.model import NODE_EXPORTER_PORT

render = templates("halo_cluster.roles.metrics")  # templates/metrics/

UNIT = "prometheus-node-exporter"  # node-exporter.spec's unit (and /usr/bin binary) name
BINARY = "/usr/bin/prometheus-node-exporter"
DROP_IN = f"/etc/systemd/system/{UNIT}.service.d/halo-cluster.conf"
# drm is off by default (GPU busy, GTT and VRAM); the others are on by default and named so that
# a later default does not take them away: hwmon (temperatures, power), infiniband (the RDMA
# port's counters), netdev (the data link), meminfo and pressure (unified memory)
COLLECTORS = ("drm", "hwmon", "infiniband", "netdev", "meminfo", "pressure")
# the package's own folder (node-exporter.spec): a node's own series, `*.prom` files
TEXTFILES = "/var/lib/prometheus/node-exporter"


def paths(data) -> tuple[str, ...]:
    return (DROP_IN,)


def reads(data) -> tuple[tuple[type, dict], ...]:
    return ((Units, {"units": (UNIT,)}),) if data.halo_metrics_enabled else ()


def listen_address() -> str:
    return f"{host.data.halo_data_address}:{NODE_EXPORTER_PORT}"


def apply() -> None:
    files = node_files(host)
    if not host.data.halo_metrics_enabled:
        if files.exists(DROP_IN):
            server.shell(
                name="Stop node_exporter (metrics.enabled: false)",
                commands=[
                    f"systemctl disable --now {UNIT}.service 2>/dev/null || true",
                    f"rm -f {DROP_IN} && systemctl daemon-reload",
                ],
            )
        return
    text = render(
        "node-exporter.conf.j2",
        node=host.data.halo_node,
        binary=BINARY,
        address=listen_address(),
        collectors=COLLECTORS,
        textfiles=TEXTFILES,
    )
    changed = files.differs(DROP_IN, text, "644")
    text_file(name=f"node_exporter's drop-in {DROP_IN}", path=DROP_IN, text=text)
    state = cached(host, Units, units=(UNIT,)).get(UNIT, {})
    if changed:
        server.shell(
            name="Start node_exporter on the data address",
            commands=[
                f"systemctl daemon-reload && systemctl enable {UNIT}.service "
                f"&& systemctl restart {UNIT}.service"
            ],
        )
    elif state.get("active") != "active" or state.get("enabled") != "enabled":
        server.shell(
            name="Start node_exporter on the data address (it was not running)",
            commands=[f"systemctl enable --now {UNIT}.service"],
        )
