"""A node that cannot be reached, said once: one line naming it and SSH's reason.

Every command that reaches nodes over the tool's transport (transport.py) says an unreachable
node the same way (`said`, `line`, `down`), its reason sorted from ssh's own stderr by
transport.py's `reason`, and bounds the attempt: ssh's ConnectTimeout and ServerAlive settings, and
`PROBE_SECONDS` for the probe `verify` runs before its checks. In `--json` output what could not
be read from such a node is null (a word's field, as Ray's state, `UNKNOWN`), never "absent" or 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from halo_cluster.config.model import Cluster, Node
from halo_cluster.tools import transport

UNKNOWN = "unknown"
PROBE_SECONDS = 15  # the probe's own bound, above ssh's ConnectTimeout (sshconfig.py)


def said(node: Node, because: str) -> str:
    """The one line that says `node` cannot be reached, `because` (`why`'s)."""
    return f"{node.name} ({node.ssh_host}:{node.ssh_port}): cannot be reached: {because}"


def line(node: Node, stderr: str) -> str:
    """The one line for `node` whose ssh failed with `stderr`."""
    return said(node, transport.why(stderr))


def down(result: transport.Result) -> str:
    """The one line for a run that did not reach its node or got no answer in time."""
    return said(result.node, result.reason)


def probe(nodes: list[Node], config: Path) -> dict[str, str]:
    """Every node of `nodes` at once over the ssh_config at `config`: {name: `why`} for those
    that cannot be reached (the others' connections stay open for the commands after it)."""
    return transport.SshTransport(nodes, config).probe(PROBE_SECONDS)


def probe_names(cluster: Cluster, names: set[str]) -> dict[str, str]:
    """{name: `why`} for the nodes of `names` that cannot be reached, probed over the tool's
    own ssh_config: why a run that reached nodes another way (pyinfra's) did not reach them."""
    nodes = [n for n in cluster.nodes if n.name in names]
    with transport.connected(cluster, nodes) as ssh:
        return ssh.probe(PROBE_SECONDS)


Probed = Callable[[set[str]], dict[str, str]]  # `meanwhile`'s answer: {name: why} of those asked


@contextmanager
def meanwhile(cluster: Cluster, names: set[str]) -> Iterator[Probed]:
    """`probe_names` of NAMES started now, beside a pyinfra run that reaches them its own way,
    and read after it for the nodes that run did not reach: a node that accepts and never
    greets then costs the connect bound once (connect.CONNECT_SECONDS), not once in pyinfra
    and once more in a probe after it (paramiko's banner error names no cause)."""
    with ThreadPoolExecutor(1) as pool:
        found = pool.submit(probe_names, cluster, names) if names else None
        yield lambda asked: {
            name: why for name, why in (found.result() if found else {}).items() if name in asked
        }


def not_reached(cluster: Cluster, events: list[dict], probed: Probed) -> list[str]:
    """After a deploy that failed: `said` for each node its report events (node/report.py)
    never saw `reached` and that could not be reached (`meanwhile`'s PROBED), in the config's
    order (pyinfra ends such a run with `No hosts remaining!` or a paramiko error naming no
    cause)."""
    reached = {e.get("node") for e in events if e.get("kind") == "reached"}
    found = probed({n.name for n in cluster.nodes} - reached)
    return [said(n, found[n.name]) for n in cluster.nodes if n.name in found]
