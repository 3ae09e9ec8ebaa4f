"""`halo-cluster upgrade --os`'s gate: what a node is observed to be before its trial boot and
after (`Observed`, one script), and the checks the node must pass after it, each a small
function in `CHECKS`, in the order a failure is said."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

from halo_cluster.config.model import Cluster
from halo_cluster.decide import cmdline, rdmatools
from halo_cluster.node import batch
from halo_cluster.node.versions import FIRMWARE
from halo_cluster.tools.upgrading.kernels import Targets, without_arch

# the boot marker's "booted" comes before NetworkManager has raised the data link and its MTU:
# the gate observes again for up to this long before it calls the boot failed, every GATE_POLL s
# (each observation is an SSH script with rpm: a failing gate makes no more than 30)
GATE_SETTLE = 60
GATE_POLL = 2.0


@dataclass(frozen=True)
class Observed:
    """What the gate compares on a node, before its reboot and after."""

    running: str  # uname -r
    cmdline: str  # /proc/cmdline
    link: dict | None  # `ip -j link show dev IF`'s one entry, None when there is no such link
    rdma_active: bool  # `rdma link` has the data link's port ACTIVE
    gpu: tuple[str, ...]  # /dev/kfd and /dev/dri/renderD*
    firmware: str  # amd-gpu-firmware's EVR, "" when not installed


# what the gate observes, one command each, run at once in one batched script (node/batch.py)
OBSERVED = ("running", "cmdline", "link", "rdma", "gpu", "firmware")


def observe_commands(interface: str) -> dict[str, str]:
    return dict(
        zip(
            OBSERVED,
            (
                "uname -r",
                "cat /proc/cmdline",
                f"ip -j link show dev {shlex.quote(interface)}",
                "rdma link",
                "ls -1 /dev/kfd /dev/dri/renderD*",  # those there, whatever ls says of the others
                f"rpm -q --qf '%{{EVR}}\\n' {FIRMWARE}",
            ),
            strict=True,
        )
    )


def observe_script(interface: str) -> str:
    return batch.named(observe_commands(interface))


def _json(text: str) -> list:
    try:
        found = json.loads(text or "[]")
    except ValueError:
        return []
    return found if isinstance(found, list) else []


def observed(out: str, interface: str) -> Observed:
    """`observe_script`'s output; what a command did not print (it failed, or the output
    stopped before it) is empty."""
    found = batch.sections(out, OBSERVED)
    text = {name: part.out.strip() if part.status == 0 else "" for name, part in found.items()}
    links = _json(text["link"])
    rdma = rdmatools.parse_rdma_link(text["rdma"])
    return Observed(
        running=text["running"],
        cmdline=text["cmdline"],
        link=links[0] if links else None,
        rdma_active=any(p["netdev"] == interface and p["state"] == "ACTIVE" for p in rdma),
        gpu=tuple(sorted(found["gpu"].filled)),
        firmware=text["firmware"],
    )


@dataclass(frozen=True)
class Seen:
    """What one check judges: the cluster, the node's data interface, the targets, and the
    node observed before its trial boot and after."""

    cluster: Cluster
    interface: str
    targets: Targets
    before: Observed
    after: Observed


def kernel(seen: Seen) -> str | None:
    running, target = seen.after.running, seen.targets.kernel
    if target and without_arch(running) != target:
        return f"uname -r is {running or 'empty'}, not {target}"
    return None


def kernel_args(seen: Seen) -> str | None:
    """The arguments for the kernel it booted (no amdgpu.gttsize from 6.15), as the kernel role
    wrote them into that kernel's entry."""
    wanted = seen.cluster.kernel
    add, drop = cmdline.for_kernel(seen.after.running or None, wanted.args, wanted.args_remove)
    missing = cmdline.missing_args(seen.after.cmdline, add, drop)
    return f"kernel arguments not active: {' '.join(missing)}" if missing else None


def link_present(seen: Seen) -> str | None:
    return f"data link {seen.interface} is missing" if seen.after.link is None else None


def link_up(seen: Seen) -> str | None:
    link = seen.after.link or {}
    down = "UP" not in link.get("flags", []) or link.get("operstate") == "DOWN"
    return f"data link {seen.interface} is DOWN" if down else None


def link_mtu(seen: Seen) -> str | None:
    found, mtu = (seen.after.link or {}).get("mtu"), seen.cluster.settings["mtu"]
    return f"data link {seen.interface} has MTU {found}, not {mtu}" if found != mtu else None


def rdma(seen: Seen) -> str | None:
    if seen.before.rdma_active and not seen.after.rdma_active:
        return "no RDMA device is ACTIVE (one was before the reboot)"
    return None


def gpus(seen: Seen) -> str | None:
    lost = sorted(set(seen.before.gpu) - set(seen.after.gpu))
    return f"GPU devices missing: {' '.join(lost)}" if lost else None


def firmware(seen: Seen) -> str | None:
    found, target = seen.after.firmware, seen.targets.firmware
    if target and found != target:
        return f"{FIRMWARE} is {found or 'not installed'}, not {target}"
    return None


CHECKS = (kernel, kernel_args, link_present, link_up, link_mtu, rdma, gpus, firmware)


def gate_failure(
    cluster: Cluster, interface: str, targets: Targets, before: Observed, after: Observed
) -> str | None:
    """The first check the node fails after its trial boot, in words; None when it passes."""
    seen = Seen(cluster, interface, targets, before, after)
    return next((failed for check in CHECKS if (failed := check(seen))), None)
