"""status's live tests' shared pieces: a two-node serving config, the same with metrics on (the
metrics role's own keys: `cluster.metrics.url`, Prometheus on the head's data address), and the
live read run by this machine's shell."""

from __future__ import annotations

import subprocess

import yaml

from halo_cluster.config.loader import parse_cluster
from halo_cluster.config.model import Cluster
from halo_cluster.node import batch
from halo_cluster.tools.status import live

SERVING = (
    "cluster_user: vllm\nserve: {enabled: true, model: org/model}\nnodes:\n"
    "  - {name: a, ssh: {host: h1}, data: {interface: eth1}}\n"
    "  - {name: b, ssh: {host: h2}, data: {interface: eth1}}\n"
)
CLUSTER = parse_cluster(yaml.safe_load(SERVING))
LIVE = parse_cluster(yaml.safe_load(SERVING + "metrics: {enabled: true}\n"))
# Prometheus asking for its password: the live queries send the metrics role's header file
LIVE_ALL = parse_cluster(
    yaml.safe_load(SERVING + "metrics: {enabled: true, listen: all, password_file: /pw}\n")
)


def run_live(cluster: Cluster, port: int, home: str = "") -> dict[str, batch.Part]:
    """The live commands in the batch format, run by this machine's shell with the real curl,
    against 127.0.0.1:PORT in place of Prometheus on the head's data address (and `home` in
    place of the cluster user's, where the header's file is)."""
    url = cluster.metrics.url.removeprefix("http://")
    commands = {
        name: command.replace(url, f"127.0.0.1:{port}").replace(
            f"~{cluster.cluster_user}/", f"{home}/"
        )
        for name, command in live.commands(cluster).items()
    }
    run = subprocess.run(
        ["sh", "-s"], input=batch.named(commands).encode(), capture_output=True, timeout=30
    )
    return batch.sections(run.stdout, commands)
