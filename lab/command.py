"""Lab command line: `python -m lab up|down|status|reboot|install-kernel|publish-image|
break-kernel|throttle|freeze|snapshot|restore|snapshots|forget` (docs/lab.md)."""

from __future__ import annotations

import argparse
import sys

from lab import cli, freeze, releases, saving, snapshot, throttle
from lab.sh import LabError


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up", help="start the lab nodes and write .lab/cluster.yml")
    p_up.add_argument("--nodes", type=int, default=2)
    p_up.add_argument("--link", choices=("roce", "thunderbolt"), default="roce")
    p_up.add_argument(
        "--fedora",
        type=int,
        choices=sorted(releases.RELEASES),
        default=releases.DEFAULT.version,
        help="the Fedora release the nodes present (docs/lab.md)",
    )
    sub.add_parser("down", help="remove everything the lab created")
    sub.add_parser("status", help="show each node and its state")
    p_reboot = sub.add_parser("reboot", help="reboot one node")
    p_reboot.add_argument("node")
    p_kernel = sub.add_parser("install-kernel", help="add a newer default boot entry")
    p_kernel.add_argument("node")
    p_kernel.add_argument("--version", default="6.18.7-200.fc43.x86_64")
    p_kernel.add_argument("--options", help="options for the entry (default: as kernel-install)")
    p_publish = sub.add_parser("publish-image", help="a new build of the image under the same tag")
    faults = p_publish.add_mutually_exclusive_group()
    faults.add_argument("--broken", action="store_true", help="its vLLM never serves")
    faults.add_argument("--slow", action="store_true", help="its vLLM is slower per token")
    p_break = sub.add_parser("break-kernel", help="booting VERSION leaves the data link down")
    p_break.add_argument(
        "version", help="as rpm prints it, e.g. 6.18.16-200.fc43 (or with .x86_64)"
    )
    p_break.add_argument("--node", action="append", help="this node only (default: every node)")
    p_throttle = sub.add_parser("throttle", help="the registry and the hub send at most RATE")
    p_throttle.add_argument("--rate", required=True, help="e.g. 2MB/s or 500KB/s; off ends it")
    p_freeze = sub.add_parser("freeze", help="stop NODE's vLLM rank for N seconds (a GPU hang)")
    p_freeze.add_argument("node")
    p_freeze.add_argument("--seconds", type=float, required=True)
    p_snapshot = sub.add_parser("snapshot", help="save the whole lab as NAME (docs/lab.md)")
    p_snapshot.add_argument("name")
    p_restore = sub.add_parser("restore", help="replace the lab with the snapshot NAME")
    p_restore.add_argument("name")
    sub.add_parser("snapshots", help="list the saved snapshots, fresh or stale")
    p_forget = sub.add_parser("forget", help="remove the snapshots named (every one: none)")
    p_forget.add_argument("names", nargs="*")
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            if not 2 <= args.nodes <= 8:
                raise LabError(f"--nodes {args.nodes}: the lab runs 2 to 8 nodes")
            if args.link == "thunderbolt" and args.nodes > 2:
                # as the config refuses it: one cable, port and subnet per pair of machines
                raise LabError(
                    f"--nodes {args.nodes} --link thunderbolt: Thunderbolt links are point to "
                    "point; a thunderbolt lab has 2 nodes (use --link roce for a switch)"
                )
            cli.up(args.nodes, args.link, releases.release(args.fedora))
        elif args.command == "down":
            cli.down()
        elif args.command == "status":
            return cli.status()
        elif args.command == "reboot":
            cli.reboot(args.node)
        elif args.command == "install-kernel":
            cli.install_kernel(args.node, args.version, args.options)
        elif args.command == "publish-image":
            cli.publish_image("broken" if args.broken else "slow" if args.slow else "none")
        elif args.command == "break-kernel":
            cli.break_kernel(args.version, args.node)
        elif args.command == "throttle":
            rate = throttle.parse_rate(args.rate)
            throttle.throttle(cli.LAB_DIR, cli.load_state().get("nodes", []), rate)
            print(f"lab: registry and hub at {args.rate}" if rate else "lab: throttle off")
        elif args.command == "freeze":
            state = cli.load_state()
            where = state.get("nodes", [])
            freeze.freeze(
                where,
                args.node,
                args.seconds,
                lambda: cli.ssh_argv(cli.node_address(state, args.node)),
            )
        elif args.command == "snapshot":
            print(f"lab: saved as {args.name} in {saving.save(args.name):.1f} s")
        elif args.command == "restore":
            print(f"lab: restored {args.name} in {saving.restore(args.name):.1f} s")
        elif args.command == "snapshots":
            print("\n".join(snapshot.listing()) or "lab: no snapshots")
        elif args.command == "forget":
            removed = snapshot.forget(args.names)
            print(f"lab: removed {', '.join(removed)}" if removed else "lab: no snapshots removed")
    except LabError as error:
        print(f"lab: {error}", file=sys.stderr)
        return 1
    return 0
