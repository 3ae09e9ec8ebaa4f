"""The serving cluster at a glance: `halo-cluster status [--json]` (or `make status`).

One SSH command per node, all nodes at once: each service unit (state, restarts, since when, the
last error line of a failed one), the image its containers run (its digest, short, and the Ray
and vLLM versions the lock records for it), the kernel and firmware the node runs and has
installed (the deploy's InstalledVersions read), and from the head the Ray nodes (address, alive,
GPUs) and vLLM's health, model and URL. Exit 0 when everything is up, 2 when something is down
(or serve.enabled is false), 1 when a node cannot be reached (one line naming it and SSH's
reason; in --json what it could not say is "unknown") or the config is bad.
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from halo_cluster.config import lock as locks
from halo_cluster.config.docs import page
from halo_cluster.config.model import Cluster, Node
from halo_cluster.config.serving import api_key_read
from halo_cluster.decide import budget
from halo_cluster.node import batch
from halo_cluster.node.facts import as_user
from halo_cluster.node.image import IMAGES_FORMAT, parse_images
from halo_cluster.node.memory import memory_command, memory_process
from halo_cluster.node.versions import firmware, summary, versions_command, versions_process
from halo_cluster.tools import options, reach, selection, transport
from halo_cluster.tools.project import config, load_or_say, next_deploy

UP, DOWN, UNREACHABLE = 0, 2, 1
VERDICTS = {UP: "up", DOWN: "something is down", UNREACHABLE: "a node cannot be reached"}
SERVICES = ("halo-ray", "halo-vllm")
# what --json says of a node it could not reach: none of it was read
NOT_READ = ("ray", "gpus", "units", "vllm", "memory", "versions", "images")
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
    gpus: float | str = reach.UNKNOWN
    units: list[Unit] = field(default_factory=list)
    vllm: dict = field(default_factory=dict)  # head only: health, models, url
    memory: dict = field(default_factory=dict)  # the memory budget (decide/budget.py)
    versions: dict = field(default_factory=dict)  # kernel and firmware (node/versions.py)
    images: dict = field(default_factory=dict)  # container -> the reference it runs (ImageName)


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
    if node.role == "head":
        ray, url = ray_nodes_command(), cluster.serve.head_url
        commands |= {
            "ray": as_user(user, f"podman exec halo-ray sh -c {shlex.quote(ray)}"),
            "health": f"curl -s -o /dev/null -m 5 -w '%{{http_code}}' {url}/health",
            "models": models_command(cluster),
        }
    return commands


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
    status.units = parse_units(found["units"].lines, found["errors"].filled)
    status.memory = asdict(node_budget(cluster, node, found["memory"].filled))
    status.versions = dict(versions_process(found["versions"].filled))
    status.images = {n: i["reference"] for n, i in parse_images(found["images"].filled).items()}
    if node.role == "worker":
        status.units = [u for u in status.units if u.name != "halo-vllm"]
        return status, []
    status.vllm = _vllm(cluster, found)
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
    )


def memory_table(statuses: list[NodeStatus]) -> str:
    """Every reachable node's memory budget, and its problems and notes, one line each."""
    budgets = [
        budget.Budget(**{**s.memory, "problems": tuple(s.memory["problems"]),
                         "notes": tuple(s.memory["notes"])})
        for s in statuses
        if s.memory
    ]  # fmt: skip
    title = f"memory budget ({page('roles/serve.md')}):"
    lines = [f"{title}\n{budget.table(budgets)}"] if budgets else []
    lines += [f"{b.node}: {text}" for b in budgets for text in (*b.problems, *b.notes)]
    return "\n".join(lines)


def versions_table(statuses: list[NodeStatus]) -> str:
    """Each reachable node's running kernel, installed kernel-core EVRs and firmware, and one
    line when the nodes differ (`make verify` fails then)."""
    read = [s for s in statuses if s.versions]
    lines = [f"kernel and firmware ({page('roles/os.md')}):"] if read else []
    lines += [f"  {s.name}: {summary(s.versions)}" for s in read]
    running = {(s.versions["running"], firmware(s.versions)) for s in read}
    if len(running) > 1:
        lines.append("  the nodes run different kernels or firmware: make them equal")
    return "\n".join(lines)


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
        read = ssh.read_all(lambda node: gather_commands(cluster, node))
    results = [read_node(cluster, n, *read[n.name]) for n in cluster.nodes]
    statuses = [status for status, _ in results]
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
    """A node in --json: what was not read from an unreachable node is "unknown"."""
    found = asdict(status)
    return found if status.reachable else found | dict.fromkeys(NOT_READ, reach.UNKNOWN)


def exit_code(cluster: Cluster, statuses: list[NodeStatus]) -> int:
    if not all(s.reachable for s in statuses):
        return UNREACHABLE
    head = next((s for s in statuses if s.role == "head"), None)
    # the head left out (--limit, --exclude): Ray and vLLM, read there, are not judged
    ray = head is None or all(s.ray == "alive" for s in statuses)
    served = head is None or head.vllm.get("health") == 200
    units = all(u.state == "active" for s in statuses for u in s.units)
    return UP if ray and served and units else DOWN


def image_cell(images: dict, lock: locks.Lock | None) -> str:
    """A node's image: the digest its Ray container runs (12 hex digits), with the Ray and vLLM
    versions the lock records for that digest, or what is wrong with it."""
    running = images.get(SERVICES[0]) or images.get(SERVICES[1])
    if not running:
        return "no container"
    digest = running.partition("@")[2]
    if not digest:
        return f"{running} (not a digest)"
    cell = digest.removeprefix("sha256:")[:12]
    if lock is None or digest != lock.digest:
        return f"{cell} (not the cluster's)"
    if len(set(images.values())) > 1:
        return f"{cell} (its containers differ)"
    return f"{cell} (ray {lock.ray or '?'}, vllm {lock.vllm or '?'})"


def image_line(lock: locks.Lock | None) -> str:
    """The cluster's digest, and the build before it (the way `halo-cluster rollback` takes),
    each with the time it started serving."""
    if lock is None:
        return "image: not resolved yet (no halo-cluster.lock: the next deploy resolves it)"
    since = f", serving since {lock.serving_since}" if lock.serving_since else ""
    trial = ", switched to but not gated (halo-cluster upgrade gates it)" if lock.trial else ""
    line = (
        f"image: {lock.reference} is {lock.digest} (resolved {lock.resolved or '?'}{since}{trial})"
    )
    if lock.previous is not None:
        served = lock.previous.serving_since or "?"
        line += f"\nprevious: {lock.previous.digest} (served since {served})"
    return line


def table(cluster: Cluster, statuses: list[NodeStatus], lock: locks.Lock | None = None) -> str:
    rows = [("node", "role", "ray", "node ip", "gpus", "image", "services", "vllm")]
    for s in statuses:
        if not s.reachable:
            continue  # said in its one line (`main`)
        services = ", ".join(
            f"{u.name} {u.state}" + (f" ({u.restarts} restarts)" if u.restarts else "")
            + (f" since {u.since}" if u.since else "")
            for u in s.units
        )  # fmt: skip
        vllm = ""
        if s.role == "head":
            health = s.vllm.get("health")
            vllm = f"health {health or 'no answer'}, {' '.join(s.vllm['models']) or 'no model'}"
            vllm += f", {s.vllm['url']}"
        image = image_cell(s.images, lock)
        gpus = f"{s.gpus:g}" if isinstance(s.gpus, float | int) else s.gpus
        rows.append((s.name, s.role, s.ray, s.address, gpus, image, services, vllm))
    rows = rows if len(rows) > 1 else []  # no node read: no table
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))] if rows else []
    lines = [image_line(lock), *filter(None, [next_deploy(cluster)])]
    lines += [
        "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]
    lines += [f"{s.name}: {u.name} failed: {u.error}" for s in statuses for u in s.units if u.error]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = options.parser("halo-cluster status", __doc__, UNREACHABLE)
    parser.flag("--json", "machine-readable output")
    selection.add(parser)
    args = parser.parse_args(argv)
    cluster = load_or_say(config())
    if cluster is None:
        return UNREACHABLE
    chosen = selection.chosen(parser.prog, cluster, args)
    if chosen is None:
        return UNREACHABLE  # its usage error
    if out := selection.left_out_line(parser.prog, selection.left_out(cluster, chosen)):
        print(out, file=sys.stderr)
    if not cluster.serve.enabled:
        said = f"serve.enabled is false in {cluster.source}: no services to show"
        if args.json:
            print(json.dumps({"exit_code": DOWN, "serving": False, "reason": said, "nodes": []}))
        else:
            print(f"status: {said}")
        return DOWN
    statuses = collect(replace(cluster, nodes=tuple(chosen)))  # only the selected nodes read
    code = exit_code(cluster, statuses)
    if args.json:
        nodes = [as_json(s) for s in statuses]
        print(json.dumps({"exit_code": code, "serving": True, "nodes": nodes}, indent=2))
    else:
        for s in statuses:
            if not s.reachable:
                print(s.unreachable)
        lock, _ = locks.read(Path(cluster.container.lock))
        parts = [table(cluster, statuses, lock), memory_table(statuses), versions_table(statuses)]
        print("\n".join(part for part in parts if part))
        print(f"status: {VERDICTS[code]}")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
