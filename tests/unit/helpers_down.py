"""The commands run as the user runs them against loopback nodes that cannot be reached (the
down-node, silent-node and Ctrl-C tests): the config, the run, the bound, and a node that
accepts the connection and never greets."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BOUND = 15  # seconds: the bound from the first attempt to the summary
NODES = {"node1": "127.0.0.1", "node2": "127.0.0.2"}


def config_text(port: int, serving: bool = True) -> str:
    nodes = "".join(
        f"  - {{name: {name}, ssh: {{host: {host}}}, data: {{interface: enp1s0f0np0}}}}\n"
        for name, host in NODES.items()
    )
    return (
        "cluster_user: vllm\n"
        f"ssh: {{user: root, port: {port}, key: ssh/id_ed25519, known_hosts: ssh/known_hosts}}\n"
        f"nodes:\n{nodes}"
        f"serve: {{enabled: {'true' if serving else 'false'}, model: facebook/opt-125m}}\n"
    )


def run(folder: Path, *argv: str, config: str = "cluster.yml") -> tuple[int, str, str, float]:
    """`halo-cluster --config CONFIG ARGV` from `folder`, as a user runs it: its exit code,
    stdout, stderr and how long it took."""
    env = dict(os.environ, NO_COLOR="1")
    env.pop("CLUSTER_CONFIG", None)
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "halo_cluster.tools.cli", "--config", config, *argv],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    return done.returncode, done.stdout, done.stderr, time.monotonic() - start


def key_folder(found: Path, config: str) -> Path:
    """FOUND with a real key (pyinfra refuses a file that is not one), an empty known_hosts and
    cluster.yml of CONFIG."""
    (found / "ssh").mkdir()
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(found / "ssh" / "id_ed25519")],
        check=True,
    )
    (found / "ssh" / "known_hosts").write_text("")
    (found / "cluster.yml").write_text(config)
    return found


@contextmanager
def silent_nodes() -> Iterator[int]:
    """A port on each node's loopback address that accepts every connection and never writes
    to it: an SSH server that never sends its banner."""
    servers: list[socket.socket] = []
    for host in NODES.values():
        server = socket.socket()
        server.bind((host, servers[0].getsockname()[1] if servers else 0))
        server.listen(16)
        server.settimeout(0.2)
        servers.append(server)
    held: list[socket.socket] = []
    done = threading.Event()

    def accept(server: socket.socket) -> None:
        while not done.is_set():
            try:
                held.append(server.accept()[0])
            except (TimeoutError, OSError):
                continue

    threads = [threading.Thread(target=accept, args=(s,), daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    try:
        yield servers[0].getsockname()[1]
    finally:
        done.set()
        for thread in threads:
            thread.join()
        for connection in [*held, *servers]:
            connection.close()
