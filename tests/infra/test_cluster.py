"""Across nodes: full-size frames both ways, one MTU everywhere, one Fedora release, one kernel
and firmware everywhere, head-to-worker SSH."""

from __future__ import annotations

from halo_cluster.node.versions import FIRMWARE, firmware, summary

from .target import Target


def test_full_size_frames(pair: tuple[Target, Target], measured) -> None:
    source, target = pair
    mtu = source.cluster.mtu
    ok, too_big = source.frames_to(target.node.address)
    assert ok.rc == 0, (
        f"{source.name} -> {target.name}: a {mtu}-byte frame with don't-fragment did not pass "
        f"({ok.stdout.strip().splitlines()[-1:]}): check both MTUs and the cable"
    )
    assert too_big.rc != 0 and "message too long" in (too_big.stdout + too_big.stderr).lower(), (
        f"{source.name}: a frame one byte over {mtu} was not refused locally: the MTU is not {mtu}"
    )
    rtt = [line for line in ok.stdout.splitlines() if line.startswith("rtt")]
    measured(rtt[0].split("=")[1].strip() if rtt else "")


def test_same_mtu_everywhere(targets: dict[str, Target]) -> None:
    mtus = {t.name: int(t.out(f"cat /sys/class/net/{t.interface}/mtu")) for t in targets.values()}
    assert len(set(mtus.values())) == 1, f"MTUs differ: {mtus}: re-run the deploy"


def test_same_release_everywhere(targets: dict[str, Target], measured) -> None:
    """One kernel stream, podman and dnf repos: the deploy refuses a cluster of two releases
    (docs/roles/os.md), and a node upgraded by hand since is found here."""
    found = {t.name: t.release for t in targets.values()}
    measured(", ".join(f"{name}: Fedora {release}" for name, release in found.items()))
    assert len(set(found.values())) == 1, (
        f"the nodes run different Fedora releases: {found}: upgrade them to one"
    )


def test_same_kernel_and_firmware_everywhere(targets: dict[str, Target], measured) -> None:
    """The nodes share one RCCL/irdma/amdgpu code path: one running kernel, one firmware."""
    found = {t.name: t.versions for t in targets.values()}
    for name, info in found.items():
        measured(f"{name}: {summary(info)}")
    kernels = {name: info["running"] for name, info in found.items()}
    firmwares = {name: firmware(info) for name, info in found.items()}
    assert len(set(kernels.values())) == 1, (
        f"the nodes run different kernels: {kernels}: boot every node into the same one"
    )
    assert len(set(firmwares.values())) == 1, (
        f"the nodes have different {FIRMWARE}: {firmwares}: install the same version everywhere"
    )


def test_head_reaches_worker_over_ssh(head: Target, worker: Target) -> None:
    user = head.cluster.cluster_user
    result = head.run(head.ssh_to_worker_command(worker.node.address))
    assert result.rc == 0, (
        f"{head.name} -> {worker.name} ({worker.node.address}) as {user}: "
        f"{result.stderr.strip()}: re-run the deploy (key and known_hosts)"
    )
