"""The serving cluster at a glance: `halo-cluster status [--json]` (or `make status`).

One batched read per node, all nodes at once (status.py reads, this module shows): each service
unit (state, restarts, since when, the last error line of a failed one), the image its containers
run (its digest, short, and the Ray and vLLM versions the lock records for it; the lock's pins of
Prometheus' and Grafana's images under the cluster's image line), the kernel and
firmware the node runs and has installed (the deploy's InstalledVersions read), and from the head
the Ray nodes (address, alive, GPUs), vLLM's health, model and URL, and with metrics on the last
5 minutes from Prometheus (live.py). Exit 0 when everything is
up, 2 when something is down (or serve.enabled is false), 1 when a node cannot be reached (one
line naming it and SSH's reason; in --json what it could not say is null) or the config is
bad. With serve.enabled false it still reads each node: its reach, image and versions.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from halo_cluster.config import lock as locks
from halo_cluster.config.docs import page
from halo_cluster.config.model import Cluster
from halo_cluster.decide import budget
from halo_cluster.node.versions import firmware, summary
from halo_cluster.tools import jsonout, options, reach, selection
from halo_cluster.tools.project import config, load_or_say, next_deploy
from halo_cluster.tools.status import live, ranks, warmup, watchdog
from halo_cluster.tools.status.read import (
    DOWN,
    PART_SECONDS,
    SERVICES,
    UNREACHABLE,
    VERDICTS,
    NodeStatus,
    as_json,
    collect,
    exit_code,
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


def live_table(statuses: list[NodeStatus]) -> str:
    """Prometheus' numbers (live.py), read on the head; nothing when it was left out."""
    head = next((s for s in statuses if s.role == "head" and s.reachable), None)
    return "\n".join(live.lines(head.live)) if head else ""


def watchdog_line(statuses: list[NodeStatus]) -> str:
    """The head's stall watchdog: running, its last restart and why (watchdog.py)."""
    head = next((s for s in statuses if s.role == "head" and s.reachable), None)
    return watchdog.line(head.watchdog) if head else ""


def warmup_line(statuses: list[NodeStatus]) -> str:
    """Each served model's last warm-up on the head (warmup.py)."""
    head = next((s for s in statuses if s.role == "head" and s.reachable), None)
    return warmup.line(head.warmup) if head else ""


def silent_lines(statuses: list[NodeStatus]) -> list[str]:
    """A node reached whose commands did not answer (a frozen user manager, Ray, Prometheus):
    one line naming it and what was stopped."""
    return [
        f"{s.name}: reached, but no answer within {PART_SECONDS} s from its read of "
        f"{', '.join(s.silent)} (a process it asks is stopped or stuck)"
        for s in statuses
        if s.silent
    ]


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
    for key, pin in sorted(lock.pins.items()):  # the head's other images (docs/roles/metrics.md)
        line += f"\n{key}: {pin.reference} is {pin.digest} (resolved {pin.resolved or '?'})"
    return line


def table(cluster: Cluster, statuses: list[NodeStatus], lock: locks.Lock | None = None) -> str:
    native = ranks.native(cluster)  # no Ray: which rank runs where, in the head's world
    rows = [("node", "role", "rank" if native else "ray", "node ip", "gpus", "image", "services",
             "vllm")]  # fmt: skip
    for s in statuses:
        if not s.reachable:
            continue  # said in its one line (`main`)
        services = ", ".join(
            f"{u.name} {u.state}" + (f" ({u.restarts} restarts)" if u.restarts else "")
            + (f" since {u.since}" if u.since else "")
            for u in s.units
        )  # fmt: skip
        vllm = ""
        if s.role == "head" and s.vllm:  # none read with serving off
            health = s.vllm.get("health")
            models = " ".join(s.vllm.get("models") or ()) or "no model"
            vllm = f"health {health or 'no answer'}, {models}, {s.vllm.get('url', '?')}"
        image = image_cell(s.images, lock)
        gpus = reach.UNKNOWN if s.gpus is None else f"{s.gpus:g}"
        ray = ranks.cell(s) if native else s.ray
        rows.append((s.name, s.role, ray, s.address, gpus, image, services, vllm))
    rows = rows if len(rows) > 1 else []  # no node read: no table
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))] if rows else []
    lines = [image_line(lock), *filter(None, [next_deploy(cluster)])]
    lines += [
        "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]
    lines += [ranks.world_line(cluster, statuses)] if native and rows else []
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
    statuses = collect(replace(cluster, nodes=tuple(chosen)))  # only the selected nodes read
    serving = cluster.serve.enabled
    # serving off: no services to judge, but each node's reach, image and versions are read
    off = None if serving else f"serve.enabled is false in {cluster.source}: no services to show"
    if ranks.native(cluster) and serving:
        ranks.place(cluster, statuses)
    code = exit_code(cluster, statuses) if serving else off_code(statuses)
    if args.json:
        nodes = [as_json(s) for s in statuses]
        out = selection.left_out(cluster, chosen)
        jsonout.emit("status", {"exit_code": code, "serving": serving, "reason": off,
                                "nodes": nodes, "left_out": out})  # fmt: skip
        return code
    for s in statuses:
        if not s.reachable:
            print(s.unreachable)
    for said in silent_lines(statuses):
        print(said)
    lock, _ = locks.read(Path(cluster.container.lock))
    if serving:
        parts = [table(cluster, statuses, lock), watchdog_line(statuses), warmup_line(statuses),
                 live_table(statuses), memory_table(statuses),
                 versions_table(statuses)]  # fmt: skip
    else:  # no services read: the serving table has nothing to show
        parts = [image_line(lock), off_table(statuses, lock), versions_table(statuses)]
    print("\n".join(part for part in parts if part))
    print(f"status: {off or VERDICTS[code]}")
    return code


def off_code(statuses: list[NodeStatus]) -> int:
    """Serving off: a node not reached is still UNREACHABLE; else DOWN, nothing serves."""
    return UNREACHABLE if not all(s.reachable for s in statuses) else DOWN


def off_table(statuses: list[NodeStatus], lock: locks.Lock | None) -> str:
    """Serving off: each node reached and the image its containers run, if any."""
    rows = [(s.name, s.role, s.address, image_cell(s.images, lock)) for s in statuses
            if s.reachable]  # fmt: skip
    if not rows:
        return ""
    rows.insert(0, ("node", "role", "node ip", "image"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
