"""An OpenSSH client config for the cluster's nodes, from the same cluster.yml as the deploy:
their keys, pinned known_hosts, and one shared connection per node (ControlMaster), since an
SSH handshake costs more than most of the commands verification and status run."""

from __future__ import annotations

from pathlib import Path

from halo_cluster.config.connect import CONNECT_SECONDS
from halo_cluster.config.model import Cluster, Node


def alias(node: Node) -> str:
    return f"halo-{node.name}"


def write(cluster: Cluster, folder: Path) -> Path:
    lines = []
    for node in cluster.nodes:
        lines += [
            f"Host {alias(node)}",
            f"  HostName {node.ssh_host}",
            f"  Port {node.ssh_port}",
            f"  User {node.ssh_user}",
            "  BatchMode yes",
            f"  ConnectTimeout {CONNECT_SECONDS}",  # the TCP connect and the banner's wait
            # a node that stops answering mid-command is said within 15 s too (docs/ci.md)
            "  ServerAliveInterval 5",
            "  ServerAliveCountMax 2",
            "  LogLevel ERROR",
            "  ControlMaster auto",
            f"  ControlPath {folder}/%C",
            "  ControlPersist 120",
        ]
        if node.ssh_key:
            lines.append(f"  IdentityFile {node.ssh_key}")
        if node.ssh_known_hosts:
            # the pinned file is the config's: never written to (UpdateHostKeys)
            lines += [
                f"  UserKnownHostsFile {node.ssh_known_hosts}",
                "  StrictHostKeyChecking yes",
                "  UpdateHostKeys no",
            ]
    path = folder / "ssh_config"
    path.write_text("\n".join(lines) + "\n")
    return path
