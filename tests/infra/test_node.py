"""Per node: packages, kernel arguments, data link, user, memlock, image, toolbox, launcher."""

from __future__ import annotations

import shlex

import pytest

from halo_cluster.decide import cmdline
from halo_cluster.node import toolbox
from halo_cluster.roles import all_packages

from . import memlock
from .target import (
    ACTIVE_PROFILES,
    KEYFILE,
    MEMLOCK_DROPINS,
    MEMLOCK_LIMITS,
    WARN,
    Target,
)

# every package the deploy installs: what each role declares
PACKAGES = all_packages()


def test_reached(reached_name: str, pytestconfig: pytest.Config) -> None:
    """The node answered the probe before the checks (conftest.py): one that did not fails
    here, so that the JUnit report counts it (its other checks are not run, not passed)."""
    summary = pytestconfig.pluginmanager.get_plugin("halo-summary")
    assert reached_name not in summary.unreachable, "cannot be reached: its line is above"


def test_packages_installed(node: Target) -> None:
    missing = [p for p in PACKAGES if p not in node.installed]
    assert not missing, f"{node.name}: not installed: {', '.join(missing)}: re-run the deploy"


def configured_places(node: Target) -> dict[str, str]:
    """Each place that decides the kernel command line -> the arguments it holds."""
    places = {"/etc/default/grub": cmdline.grub_cmdline(node.text("/etc/default/grub")) or ""}
    for path in node.boot_entries:
        places[path] = cmdline.bls_options(node.text(path)) or ""
    places["/etc/kernel/cmdline"] = node.text("/etc/kernel/cmdline")
    return places


def arguments_for(node: Target, release: str | None) -> tuple[list[str], list[str]]:
    """(to have, to lack) for a kernel of this release, as the kernel role writes them (no
    amdgpu.gttsize from 6.15: `cmdline.for_kernel`)."""
    cluster = node.cluster
    return cmdline.for_kernel(release, cluster.kernel_args, cluster.kernel_args_remove)


def place_release(node: Target, place: str) -> str | None:
    """The kernel a place's arguments are for: a BLS entry's own (`version`), else the running
    one (the GRUB defaults and /etc/kernel/cmdline serve the kernels after it)."""
    if place.startswith("/boot/"):
        found = [line.split()[1] for line in node.text(place).splitlines()
                 if line.startswith("version") and len(line.split()) > 1]  # fmt: skip
        return found[0] if found else None
    return node.out("uname -r")


def test_kernel_arguments_configured(node: Target) -> None:
    problems = []
    for place, line in configured_places(node).items():
        tokens = cmdline.split_args(line)
        wanted, remove = arguments_for(node, place_release(node, place))
        for arg in wanted:
            if tokens.count(arg) != 1:
                problems.append(f"{arg} {tokens.count(arg)} times in {place}")
        problems += [f"{t} still in {place}" for t in tokens if cmdline.missing_args(t, [], remove)]
    assert not problems, (
        f"{node.name}: expected each argument once in all three places; "
        f"found {'; '.join(problems)}: re-run the deploy"
    )


def test_kernel_arguments_active(node: Target, measured) -> None:
    running = node.text("/proc/cmdline")
    wanted, remove = arguments_for(node, node.out("uname -r"))
    missing = cmdline.missing_args(running, wanted, remove)
    configured = configured_places(node)["/etc/kernel/cmdline"]
    pending = [a for a in missing if a in cmdline.split_args(configured)]
    assert not pending, (
        f"{node.name}: reboot required: {' '.join(pending)} configured but not "
        "active in /proc/cmdline: reboot the node (or set reboot: if-needed)"
    )
    assert not missing, f"{node.name}: not active and not configured: {' '.join(missing)}"
    measured(f"{len(wanted)} arguments active")


def test_foreign_kernel_arguments_kept(node: Target) -> None:
    """Arguments the node booted with that we do not manage are still in its boot entries."""
    managed = {
        cmdline.key_of(a) for a in node.cluster.kernel_args + node.cluster.kernel_args_remove
    }
    running = cmdline.split_args(node.text("/proc/cmdline"))
    foreign = [
        a
        for a in running
        if not a.startswith(("BOOT_IMAGE=", "initrd=")) and cmdline.key_of(a) not in managed
    ]
    for place, line in configured_places(node).items():
        if place == "/etc/default/grub":
            continue
        lost = [a for a in foreign if a not in cmdline.split_args(line)]
        assert not lost, f"{node.name}: {place} lost {' '.join(lost)}: restore it by hand"


def test_data_link_profile(node: Target, measured) -> None:
    interface, mtu = node.interface, node.cluster.mtu
    active = node.out(ACTIVE_PROFILES).splitlines()
    assert f"halo-data:{interface}" in active, (
        f"{node.name}: profile halo-data not active on {interface} (active: {', '.join(active)}): "
        "re-run the deploy, or `nmcli connection up halo-data`"
    )
    mode, owner = node.out(f"stat -c '%a %U' {KEYFILE}").split()
    assert (int(mode, 8), owner) == (0o600, "root"), (
        f"{node.name}: {KEYFILE} is {oct(int(mode, 8))} {owner}, expected 0600 root: "
        "NetworkManager ignores it; re-run the deploy"
    )
    found_mtu = int(node.out(f"cat /sys/class/net/{interface}/mtu"))
    assert found_mtu == mtu, (
        f"{node.name}: MTU {found_mtu} on {interface}, expected {mtu}: re-run the deploy; if the "
        "peer is also right, check the DAC link"
    )
    address = f"{node.node.address}/{node.cluster.subnet.prefixlen}"
    addresses = node.addresses(interface)
    assert node.node.address in addresses, (
        f"{node.name}: {address} not on {interface} (found {addresses}): re-run the deploy"
    )
    measured(f"{interface} {address} mtu {found_mtu}")


def test_cluster_user_groups(node: Target) -> None:
    user = node.cluster.cluster_user
    groups = set(node.out(f"id -nG {shlex.quote(user)}").split())
    wanted = {"render", "video"} | ({"rdma"} if node.cluster.interconnect == "roce" else set())
    existing = wanted & node.existing_groups
    assert existing <= groups, (
        f"{node.name}: {user} is not in {', '.join(existing - groups)}: re-run the deploy"
    )


def test_memlock_configured(node: Target) -> None:
    if node.cluster.interconnect != "roce":
        pytest.skip("thunderbolt: no RDMA, memlock is left as it is (by design)")
    user = node.cluster.cluster_user
    limits = node.files.get(MEMLOCK_LIMITS)
    assert limits and f"{user} hard memlock unlimited" in limits.text, (
        f"{node.name}: memlock limit missing"
    )
    for path in MEMLOCK_DROPINS:
        dropin = node.files.get(path)
        assert dropin and "DefaultLimitMEMLOCK=infinity" in dropin.text, (
            f"{node.name}: {path} missing: re-run the deploy"
        )


def test_memlock_unlimited_in_the_containers(node: Target, measured) -> None:
    """Where RCCL registers memory: each running service container's own hard limit, or with
    serving off the toolbox's `ulimit -l`. A fresh login session says nothing of them: it gets
    limits.d's unlimited while a user manager started before it keeps its services at 8 MiB."""
    if node.cluster.interconnect != "roce":
        pytest.skip("thunderbolt: no RDMA, memlock is left as it is (by design)")
    node.not_verified("memlock above 8 MiB")
    user = node.cluster.cluster_user
    if not node.cluster.serve.enabled:
        words = node.inside_toolbox.split()  # the devices, then memlock=<ulimit -l>
        value = words[-1].removeprefix("memlock=") if words else "unread"
        measured(f"toolbox ulimit -l {value}")
        assert value == "unlimited", (
            f"{node.name}: locked memory {value} KiB in toolbox {node.cluster.toolbox}, expected "
            f"unlimited: stop it (`podman stop {node.cluster.toolbox}` as {user}) and enter it "
            "again from a new login"
        )
        return
    found = node.services_memlock
    measured(memlock.measured(found))
    problem = memlock.problem(node.name, user, found)
    assert problem is None, problem


def test_image_present(node: Target, measured) -> None:
    image_id = node.image_id
    assert image_id, f"{node.name}: {node.cluster.image} not pulled for {node.cluster.cluster_user}"
    measured(image_id[:12])


def test_toolbox_present_with_expected_options(node: Target) -> None:
    name = node.cluster.toolbox
    image_id, made_from = node.image_id, node.toolbox_image
    assert made_from, f"{node.name}: no toolbox {name}: re-run the deploy"
    assert made_from == image_id, (
        f"{node.name}: toolbox {name} made from {made_from[:12]}, the "
        f"image is {image_id[:12]}: re-run the deploy to recreate it"
    )
    has_ib = node.has_infiniband
    record = node.out(node.toolbox_record_command).strip()
    assert record == toolbox.record(image_id, toolbox.options(has_ib)), (
        f"{node.name}: toolbox {name} was made with other options ({record}): re-run the deploy"
    )


def test_inside_the_toolbox(node: Target, measured) -> None:
    """What the options are for, checked where it counts: inside the toolbox."""
    name = node.cluster.toolbox
    wanted = ["/dev/dri", "/dev/kfd"] + (["/dev/infiniband"] if node.has_infiniband else [])
    found = node.inside_toolbox
    assert all(path in found.split() for path in wanted), (
        f"{node.name}: inside toolbox {name} expected {', '.join(wanted)}, found {found.split()}"
    )
    measured(found.split()[-1])


def test_launcher_defaults(node: Target) -> None:
    env = node.text("/etc/halo-cluster/cluster.env")
    cluster = node.cluster
    for line in (
        f"VLLM_HEAD_IP={cluster.head.address}",
        f"VLLM_HOST_IP={node.node.address}",
        f"VLLM_REMOTE_TOOLBOX={cluster.toolbox}",
        f"NCCL_SOCKET_IFNAME={node.interface}",
    ):
        assert line in env.splitlines(), f"{node.name}: {line} missing in cluster.env"


def test_nothing_upgrades_behind_the_lock(node: Target, measured) -> None:
    """With os.lock: PackageKit (GNOME Software's and Cockpit's way to update), its offline
    update waiting for the next boot, and dnf5 automatic applying updates. A WARN, not a
    failure: Fedora Workstation ships PackageKit, and the node serves as it is."""
    if not node.cluster.os_lock:
        pytest.skip("os.lock is false: no lock for an upgrade to go behind")
    warnings, found = node.behind_the_lock()
    measured("; ".join(found))
    if warnings:
        pytest.skip(f"{WARN}: {node.name}: " + "; ".join(warnings))
