"""What `halo-cluster status` reads (its output is view.py's): one batched read per node
through the transport, all nodes at once: each service unit (state, restarts, since when, the
last error line of a failed one), the image its containers run, the kernel and firmware the node
runs and has installed (the deploy's InstalledVersions read), its memory budget, and from the
head Ray's nodes (address, alive, GPUs; with `serve.launcher: native` the head's world instead:
ranks.py) and vLLM's health, models and URL; and the verdict (exit
0 everything up, 2 something down, 1 a node not reached)."""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field

from halo_cluster.config.model import Cluster, Node
from halo_cluster.config.serving import api_key_read
from halo_cluster.decide import budget
from halo_cluster.node import batch
from halo_cluster.node.facts import as_user
from halo_cluster.node.image import IMAGES_FORMAT, parse_images
from halo_cluster.node.memory import memory_command, memory_process
from halo_cluster.node.versions import versions_command, versions_process
from halo_cluster.tools import reach, transport
from halo_cluster.tools.commands.exits import DOWN, ERROR, OK
from halo_cluster.tools.status import live, ranks, warmup, watchdog

UP, UNREACHABLE = OK, ERROR  # status's names for them: 2 is DOWN, something is down
VERDICTS = {UP: "up", DOWN: "something is down", UNREACHABLE: "a node cannot be reached"}
SERVICES = ("halo-ray", "halo-vllm")
# what --json says of a node it could not reach: none of it was read, so null (never a list's
# or a number's "unknown": commands/documents.py); `ray`, a word, stays "unknown"
NOT_READ = ("gpus", "units", "vllm", "memory", "versions", "images", "live", "watchdog", "warmup")
# each command of the read is stopped after PART_SECONDS (a frozen user manager, Ray or
# Prometheus: that part is said, the others are read), the node's whole read after
# READ_SECONDS (a node whose SSH session itself says nothing)
PART_SECONDS = 15
READ_SECONDS = 30
STOPPED = (transport.TIMED_OUT, 128 + 9)  # a part's exit when timeout(1) stopped it
# run inside the Ray container with the Python that runs `ray`: the image's own, whatever it is
RAY_NODES = (
    "import json, ray; ray.init(address='auto', logging_level='ERROR'); "
    "print(json.dumps([[n['NodeManagerAddress'], n['Alive'], n['Resources'].get('GPU', 0)] "
    "for n in ray.nodes()]))"
)


def ray_nodes_command() -> str:
    """Inside the Ray container: Ray's nodes as JSON, with the Python that runs `ray`."""
    return (
        "py=$(sed -n '1s/^#!//p' \"$(command -v ray)\"); "
        f'"${{py:-python3}}" -c {shlex.quote(RAY_NODES)}'
    )


@dataclass
class Unit:
    name: str
    state: str = "absent"
    restarts: int = 0
    since: str = ""
    error: str = ""


@dataclass
class NodeStatus:
    name: str
    role: str
    address: str
    reachable: bool = True
    unreachable: str = ""  # the one line saying why it cannot be reached (reach.py)
    ray: str = reach.UNKNOWN  # alive, dead, absent (not among Ray's nodes), unknown (not read)
    gpus: float | None = None  # None: not read
    units: list[Unit] = field(default_factory=list)
    vllm: dict = field(default_factory=dict)  # head only: health, models, url
    memory: dict = field(default_factory=dict)  # the memory budget (decide/budget.py)
    versions: dict = field(default_factory=dict)  # kernel and firmware (node/versions.py)
    images: dict = field(default_factory=dict)  # container -> the reference it runs (ImageName)
    rank: dict = field(default_factory=dict)  # serve.launcher: native: its rank (ranks.py)
    live: dict = field(default_factory=dict)  # head only: Prometheus' numbers (live.py)
    watchdog: dict = field(default_factory=dict)  # head only: the stall watchdog's last restart
    warmup: dict = field(default_factory=dict)  # head only: each model's last warm-up
    silent: list[str] = field(default_factory=list)  # the parts of its read stopped unanswered


def models_command(cluster: Cluster) -> str:
    """On the head: vLLM's /v1/models, with the key read by the shell from secrets.env; `bench`
    reads the same answer. The header goes to curl on stdin (`-H @-`): printf is the shell's
    builtin, so the key is in no process's argv (/proc/PID/cmdline is world-readable); with no
    key, curl reads no header."""
    user, url = cluster.cluster_user, cluster.serve.head_url
    return (
        api_key_read(f"~{user}")
        + '{ [ -z "$key" ] || printf \'Authorization: Bearer %s\\n\' "$key"; } | '
        f"curl -s -m 5 -H @- {url}/v1/models"
    )


def gather_commands(cluster: Cluster, node: Node) -> dict[str, str]:
    """What status reads of a node, as named commands of one batched read (node/batch.py)."""
    user = cluster.cluster_user
    units = " ".join(f"{s}.service" for s in SERVICES)
    show = f"systemctl --user show -p Id,ActiveState,NRestarts,StateChangeTimestamp {units}"
    failed = as_user(user, "systemctl --user is-failed $u.service")
    inspect = f"podman container inspect --format {shlex.quote(IMAGES_FORMAT)} {' '.join(SERVICES)}"
    last = as_user(user, "journalctl --user -u $u.service -n 1 -q --no-pager -o cat")
    commands = {
        "units": as_user(user, show),
        "errors": f"for u in {' '.join(SERVICES)}; do "
        f'if [ "$({failed} 2>/dev/null)" = failed ]; then echo "$u $({last})"; fi; done',
        "images": as_user(user, inspect),
        # the deploy's NodeMemory and ModelWeights reads: MemTotal, GTT, weights
        "memory": memory_command(user, cluster.serve.model),
        "versions": versions_command(),
    }
    if not cluster.serve.enabled:  # no services to read: what the node runs, as deployed
        return {name: commands[name] for name in ("images", "versions")}
    if node.role == "head":
        ray, url = ray_nodes_command(), cluster.serve.head_url
        commands |= {
            "ray": as_user(user, f"podman exec halo-ray sh -c {shlex.quote(ray)}"),
            "health": f"curl -s -o /dev/null -m 5 -w '%{{http_code}}' {url}/health",
            "models": models_command(cluster),
        } | live.commands(cluster)
        commands |= watchdog.commands(cluster) | warmup.commands(cluster)
        if ranks.native(cluster):  # no Ray to ask: the head's own view of its world
            commands = {n: c for n, c in commands.items() if n != "ray"}
            commands |= ranks.head_commands(cluster)
    return commands


def bounded(commands: dict[str, str]) -> dict[str, str]:
    """Each command stopped after PART_SECONDS (timeout(1): exit 124, or 137 when it needed the
    KILL 2 s later), so that one part that hangs cannot hold the node's read."""
    bound = f"timeout -k 2 {PART_SECONDS} sh -c"
    return {name: f"{bound} {shlex.quote(command)}" for name, command in commands.items()}


def show_blocks(lines: list[str]) -> list[dict[str, str]]:
    """`systemctl show -p ...` of several units: one block of KEY=value lines per unit, a blank
    line between units. Within a block systemd prints its properties in its own D-Bus order, not
    in the order asked (a service's NRestarts comes before the unit's Id), so a value belongs to
    its block, never to the Id line before it."""
    blocks: list[dict[str, str]] = []
    block: dict[str, str] = {}
    for line in [*lines, ""]:
        if line.strip():
            key, _, value = line.partition("=")
            block[key] = value
        elif block:
            blocks.append(block)
            block = {}
    return blocks


def parse_units(lines: list[str], errors: list[str]) -> list[Unit]:
    units: dict[str, Unit] = {}
    for block in show_blocks(lines):
        name = block.get("Id", "").removesuffix(".service")
        if name:
            restarts = block.get("NRestarts", "")
            units[name] = Unit(
                name,
                state=block.get("ActiveState", "absent"),
                restarts=int(restarts) if restarts.isdigit() else 0,
                since=block.get("StateChangeTimestamp", ""),
            )
    for line in errors:
        name, _, message = line.partition(" ")
        if name in units:
            units[name].error = message
    return [units.get(name, Unit(name)) for name in SERVICES]


def read_node(
    cluster: Cluster, node: Node, result: transport.Result, found: dict[str, batch.Part]
) -> tuple[NodeStatus, list]:
    """A node's status from its read (and, on the head, Ray's nodes as Ray lists them)."""
    status = NodeStatus(node.name, node.role, node.address)
    if not result.reached:
        status.reachable, status.unreachable = False, reach.down(result)
        return status, []
    status.silent = [name for name, part in found.items() if part.status in STOPPED]
    status.versions = dict(versions_process(found["versions"].filled))
    status.images = {n: i["reference"] for n, i in parse_images(found["images"].filled).items()}
    if not cluster.serve.enabled:
        return status, []
    status.units = parse_units(found["units"].lines, found["errors"].filled)
    if "units" in status.silent:  # not "absent": the user manager did not answer
        status.units = [Unit(name, state=reach.UNKNOWN) for name in SERVICES]
    status.memory = asdict(node_budget(cluster, node, found["memory"].filled))
    status.units = [u for u in status.units if u.name in ranks.services(cluster, node)]
    if node.role == "worker":
        return status, []
    status.vllm = _vllm(cluster, found)
    status.live = live.read(cluster, found)
    status.watchdog = watchdog.read(found)
    status.warmup = warmup.read(found)
    if ranks.native(cluster):
        status.vllm["world"] = ranks.head_world(found)
        return status, []
    try:
        ray_nodes = json.loads((found["ray"].filled or ["[]"])[-1])
    except ValueError:
        ray_nodes = []
    return status, ray_nodes


def node_budget(cluster: Cluster, node: Node, lines: list[str]) -> budget.Budget:
    """The node's memory budget, as the deploy weighs it before vLLM starts."""
    serve = cluster.serve
    return budget.from_reading(
        node.name,
        memory_process(lines),
        model=serve.model or "the model",
        utilization=serve.gpu_memory_utilization,
        object_store_mib=serve.object_store_mib,
        gpus=serve.gpus,
        parallelism=serve.parallelism,
        configured_gtt_bytes=cluster.kernel.gtt_bytes,
        ray=serve.launcher == "ray",
    )


def _vllm(cluster: Cluster, found: dict[str, batch.Part]) -> dict:
    health = (found["health"].filled or ["000"])[0].strip()
    try:
        models = [m["id"] for m in json.loads(found["models"].out)["data"]]
    except (ValueError, KeyError, TypeError):
        models = []
    url = cluster.serve.head_url
    return {"health": int(health) if health.isdigit() else 0, "models": models, "url": url}


def collect(cluster: Cluster) -> list[NodeStatus]:
    with transport.connected(cluster) as ssh:
        read = ssh.read_all(lambda node: bounded(gather_commands(cluster, node)), READ_SECONDS)
    results = [read_node(cluster, n, *read[n.name]) for n in cluster.nodes]
    statuses = [status for status, _ in results]
    if ranks.native(cluster) or not cluster.serve.enabled:
        return statuses  # no Ray: each rank is placed on the whole config (main), or none
    head = next((s for s in statuses if s.role == "head"), None)
    if head is None or not head.reachable:
        # Ray's nodes are read on the head (left out, or unreachable): every node's stays unknown
        return statuses
    ray_nodes = next((nodes for _, nodes in results if nodes), [])
    for status in statuses:
        mine = [n for n in ray_nodes if n[0] == status.address]
        status.ray, status.gpus = "absent", 0
        if mine:
            status.ray = "alive" if any(alive for _, alive, _ in mine) else "dead"
            status.gpus = sum(gpus for _, alive, gpus in mine if alive)
    return statuses


def as_json(status: NodeStatus) -> dict:
    """A node in --json: what was not read from an unreachable node is null."""
    found = asdict(status)
    return found if status.reachable else found | dict.fromkeys(NOT_READ)


def exit_code(cluster: Cluster, statuses: list[NodeStatus]) -> int:
    if not all(s.reachable for s in statuses):
        return UNREACHABLE
    head = next((s for s in statuses if s.role == "head"), None)
    # the head left out (--limit, --exclude): Ray and vLLM, read there, are not judged
    ray = head is None or all(s.ray == "alive" for s in statuses)
    if ranks.native(cluster):
        ray = ranks.whole(cluster, statuses)  # no Ray: the head's world is whole
    served = head is None or head.vllm.get("health") == 200
    units = all(u.state == "active" for s in statuses for u in s.units)
    return UP if ray and served and units else DOWN
