"""`serve.launcher: native`: who is in the head's vLLM world, as the head shows it. The deploy's
/health identity check (roles/serve/services.py) and `halo-cluster status` read the same two
things:

- the world size the head's executor reports: its leader's line `DP group leader: node_rank=0,
  ... world_size=W, local_world_size=L` (vllm/v1/executor/multiproc_executor.py: _init_executor),
  the last one in halo-vllm's journal (the running process's: it logs it before it listens);
- the ranks' nodes: every rank's workers hold a connection to torch's TCPStore on the head's
  master port for as long as they run (vllm/distributed/parallel_state.py:
  init_distributed_environment, `tcp://master_addr:master_port`; rank 0's own workers from the
  head's address), so the peers of that port's established connections are the nodes whose
  ranks are in the world, and a rank of a node not configured (a departed node still running,
  another cluster's) shows among them."""

from __future__ import annotations

import re
import shlex

from halo_cluster.node.facts import as_user

LEADER = re.compile(r"DP group leader: .*?\bworld_size=(\d+)")


def leader_command(user: str) -> str:
    """The head's last leader line from halo-vllm's journal ("" when there is none)."""
    journal = "journalctl --user -u halo-vllm.service -q --no-pager -o cat"
    return f"{as_user(user, journal)} | grep 'DP group leader:' | tail -n 1"


def peers_command(port: int) -> str:
    """The peers of the established connections to the head's master port, one a line."""
    return f"ss -Htn state established {shlex.quote(f'sport = :{port}')}"


def world_size(line: str) -> int | None:
    """The world size in the head's leader line, None when it names none."""
    found = LEADER.search(line)
    return int(found.group(1)) if found else None


def store_peers(lines: list[str]) -> list[str]:
    """The peers' addresses in `ss -Htn state established` lines (no State column), sorted,
    each once: `192.168.100.2:41234`, `[::ffff:192.168.100.2]:41234`."""
    found = set()
    for line in lines:
        fields = line.split()
        if len(fields) >= 4:
            address = fields[3].rsplit(":", 1)[0].strip("[]")
            found.add(address.removeprefix("::ffff:"))
    return sorted(found)


def not_the_world(
    size: int | None, peers: list[str], world: int, nodes: list[str], port: int
) -> str | None:
    """What shows that the head's world is not the configured one (None: it is)."""
    if size is None:
        return "the head's log names no world size yet (vLLM's `DP group leader` line)"
    if size != world:
        return f"the head's world size is {size}, not TP x PP = {world}"
    if peers != sorted(nodes):
        found = " ".join(peers) or "none"
        return (
            f"the ranks on the head's master port {port} are from [{found}], "
            f"not the configured {' '.join(sorted(nodes))}"
        )
    return None
