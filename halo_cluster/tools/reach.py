"""A node that cannot be reached, said once: one line naming it and SSH's reason.

Every command that reaches nodes over the tool's ssh_config (sshconfig.py) says an unreachable
node the same way (`line`), its reason sorted from ssh's own stderr by one pure function
(`reason`), and bounds the attempt: ssh's ConnectTimeout and ServerAlive settings, and
`PROBE_SECONDS` for the probe `verify` runs before its checks. In `--json` output what could not
be read from such a node is `UNKNOWN`, never "absent" or 0.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from halo_cluster.config.model import Cluster, Node
from halo_cluster.tools import sshconfig

UNKNOWN = "unknown"
UNREACHABLE = "unreachable"  # ssh's stderr names none of the causes below
PROBE_SECONDS = 15  # the probe's own bound, above ssh's ConnectTimeout (sshconfig.py)
# (what ssh prints, the reason said), the first match wins: OpenSSH's messages, and paramiko's
# (pyinfra's) where they differ
CAUSES = (
    ("Connection refused", "refused"),
    ("timed out", "timed out"),
    ("Host key verification failed", "host key"),
    ("REMOTE HOST IDENTIFICATION HAS CHANGED", "host key"),
    ("Permission denied", "authentication"),
    ("Authentication failed", "authentication"),
    ("Could not resolve hostname", "unknown host"),
    ("Name or service not known", "unknown host"),
    ("No route to host", "no route"),
    ("Network is unreachable", "no route"),
    ("Connection reset", "connection reset"),
    ("Connection closed", "connection closed"),
)


def reason(stderr: str) -> tuple[str, str]:
    """SSH's reason for a failed connection, from its stderr: (the cause, one of CAUSES' or
    UNREACHABLE; ssh's line that says it, or its last line)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for marker, cause in CAUSES:
        for text in reversed(lines):
            if marker.lower() in text.lower():
                return cause, text[:200]
    return UNREACHABLE, (lines[-1][:200] if lines else "ssh exited 255 without a message")


def why(stderr: str) -> str:
    """`reason` as the end of a line: `refused (ssh: connect to host ...: Connection refused)`."""
    cause, said = reason(stderr)
    return f"{cause} ({said})"


def said(node: Node, because: str) -> str:
    """The one line that says `node` cannot be reached, `because` (`why`'s)."""
    return f"{node.name} ({node.ssh_host}:{node.ssh_port}): cannot be reached: {because}"


def line(node: Node, stderr: str) -> str:
    """The one line for `node` whose ssh failed with `stderr`."""
    return said(node, why(stderr))


def silent(node: Node, seconds: float) -> str:
    """The one line for a node that took the connection but did not answer in time."""
    return said(node, f"timed out (no answer within {seconds:g} s)")


def probe_one(config: Path, node: Node) -> str | None:
    """`why` `node` cannot be reached when `ssh ... true` fails, else None (its connection then
    stays open for the commands after it: ControlMaster, sshconfig.py)."""
    argv = ["ssh", "-F", str(config), sshconfig.alias(node), "true"]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=PROBE_SECONDS, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return f"timed out (no answer within {PROBE_SECONDS} s)"
    except OSError as error:  # no ssh client on this machine
        return str(error)
    return why(done.stderr) if done.returncode == 255 else None


def probe(nodes: list[Node], config: Path) -> dict[str, str]:
    """Every node of `nodes` at once: {name: `why`} for those that cannot be reached."""
    if not nodes:
        return {}
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        found = pool.map(lambda n: probe_one(config, n), nodes)
        return {n.name: why for n, why in zip(nodes, found, strict=True) if why}


def probe_names(cluster: Cluster, names: set[str]) -> dict[str, str]:
    """{name: `why`} for the nodes of `names` that cannot be reached, probed over the tool's
    own ssh_config: why a run that reached nodes another way (pyinfra's) did not reach them."""
    nodes = [n for n in cluster.nodes if n.name in names]
    with tempfile.TemporaryDirectory(prefix="halo-reach-") as folder:
        config = sshconfig.write(cluster, Path(folder))
        found = probe(nodes, config)
        close(nodes, config)
    return found


def not_reached(cluster: Cluster, events: list[dict], limited: bool = False) -> list[str]:
    """After a deploy that failed: `said` for each node its report events (node/report.py)
    never saw `reached` and that cannot be reached now, in the config's order (pyinfra ends
    such a run with `No hosts remaining!` or a paramiko error naming no cause). A run LIMITED
    to some nodes (`--limit`, `--exclude`) is not read: the nodes it left out were not tried."""
    reached = {e.get("node") for e in events if e.get("kind") == "reached"}
    if limited:
        return []
    found = probe_names(cluster, {n.name for n in cluster.nodes} - reached)
    return [said(n, found[n.name]) for n in cluster.nodes if n.name in found]


def close(nodes: list[Node], config: Path) -> None:
    """The shared connections' masters ended (a master left would outlive its folder)."""
    argv = ["ssh", "-F", str(config), "-O", "exit", *(sshconfig.alias(n) for n in nodes)]
    with contextlib.suppress(subprocess.SubprocessError, OSError):
        subprocess.run(argv, capture_output=True, timeout=PROBE_SECONDS, check=False)
