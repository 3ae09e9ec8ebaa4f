"""What the deploy plans on real Fedora 43 hosts, from their recorded outputs (no host needed)."""

from __future__ import annotations

import pytest

from tests.plan.harness import plan
from tests.plan.nodes import (
    E810,
    ENTRY_F35,
    ENTRY_RHEL,
    GRUB,
    KEYFILE,
    LOOPBACK,
    MGMT,
    cluster,
    converged_node,
    fresh_node,
    plan_both,
    plan_by_mac,
    refusal,
)
from tests.recorded import fixture

CORE_ROLES = ("Packages", "Kernel arguments", "Data link")
ROCKY_ARGS = (
    "crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M resume=/dev/mapper/rl-swap rd.lvm.lv=rl/root"
    " rd.lvm.lv=rl/swap rhgb quiet"
)
SEED_ARGS = "iommu=pt pci=realloc pcie_aspm=off amdgpu.gttsize=126976 ttm.pages_limit=32505856"
SEED_ARGS_6_15 = "iommu=pt pci=realloc pcie_aspm=off ttm.pages_limit=32505856"  # no gttsize
ENTRY_F44 = "/boot/loader/entries/0123abcd-7.1.10-200.fc44.x86_64.conf"
ENTRY_F42 = "/boot/loader/entries/0123abcd-6.14.0-63.fc42.x86_64.conf"


def test_fresh_node_plan() -> None:
    result = plan_both(cluster())
    names = result.names("halo1")
    assert names[0].startswith("Packages | Install rdma-core libibverbs-utils perftest")
    dnf = next(c for c in result.commands("halo1") if c.startswith("dnf install"))
    for package in ("rdma-core", "libibverbs-utils", "perftest", "podman", "toolbox"):
        assert package in dnf.split()
    uploads = result.uploads("halo1")
    assert {GRUB, ENTRY_F35, ENTRY_RHEL, "/etc/kernel/cmdline", KEYFILE} <= set(uploads)
    assert "Data link | Activate halo-data on enp194s0np0" in names


def test_grub_defaults_keep_every_other_line() -> None:
    grub = plan_both(cluster()).uploads("halo1")[GRUB]
    before = fixture("etc-default-grub-rocky-cat.txt").splitlines()
    after = grub.splitlines()
    assert len(after) == len(before)
    changed = [(b, a) for b, a in zip(before, after, strict=True) if a != b]
    assert changed == [
        (
            f'GRUB_CMDLINE_LINUX="{ROCKY_ARGS}"',
            f'GRUB_CMDLINE_LINUX="{ROCKY_ARGS} {SEED_ARGS}"',
        )
    ]


def test_every_boot_entry_gets_the_arguments_and_keeps_tuned_variables() -> None:
    uploads = plan_both(cluster()).uploads("halo1")
    rhel = uploads[ENTRY_RHEL].splitlines()
    before = fixture("bls-entry-rhel10.conf").splitlines()
    assert [line for line in rhel if not line.startswith("options")] == [
        line for line in before if not line.startswith("options")
    ]
    options = next(line for line in rhel if line.startswith("options "))
    assert "$tuned_params rhgb quiet " + SEED_ARGS in options
    assert options.count("iommu=pt") == 1
    assert uploads[ENTRY_F35].endswith(
        f"rhgb quiet {SEED_ARGS}\ngrub_users $grub_users\n"
        "grub_arg --unrestricted\ngrub_class fedora\n"
    )


def test_kernel_cmdline_created_from_the_default_entry() -> None:
    # no grubenv: GRUB boots the newest version, the el10 6.12 entry
    created = plan_both(cluster()).uploads("halo1")["/etc/kernel/cmdline"]
    assert created == (
        "root=/dev/mapper/rhel-root ro crashkernel=2G-64G:256M,64G-:512M "
        "resume=UUID=512ad036-a4f3-40cb-ba3e-2133be9b2589 rd.lvm.lv=rhel/root rd.lvm.lv=rhel/swap "
        f"$tuned_params rhgb quiet {SEED_ARGS}\n"
    )


def test_other_values_replaced_in_place_and_iommu_off_removes_pt() -> None:
    prerelease = fixture("proc-cmdline-framework-desktop-strix-halo-fedora43-prerelease.txt")
    options = prerelease.split(" ", 1)[1].strip() + " iommu=pt"
    grub = f'GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX="{options}"\nGRUB_ENABLE_BLSCFG=true\n'
    node = fresh_node(boot={GRUB: grub, "/proc/cmdline": prerelease})
    result = plan_both(cluster("kernel: {iommu: off, gtt_gib: 96}\n"), node=node)
    line = result.uploads("halo1")[GRUB].splitlines()[1]
    assert line == (
        'GRUB_CMDLINE_LINUX="root=UUID=7138d111-30d8-4fe0-af64-0d8cf3b01c3c ro'
        " rootflags=subvol=root rhgb quiet amdgpu.gttsize=98304 amdttm.pages_limit=27648000"
        " amdttm.page_pool_size"
        ' =27648000 amd_iommu=off pci=realloc pcie_aspm=off ttm.pages_limit=25165824"'
    )


def test_converged_node_plans_nothing() -> None:
    again = plan_both(cluster(), node=converged_node())
    core = [op for op in again.ops["halo1"] if op.name.split(" | ")[0] in CORE_ROLES]
    assert [op.commands for op in core] == [[]] * len(core)
    assert [op.uploads for op in core] == [{}] * len(core)


def test_mtu_changed_behind_network_manager_is_reapplied() -> None:
    again = plan_both(cluster(), node=converged_node(mtu=1500))
    assert "Data link | Activate halo-data on enp194s0np0" in again.names("halo1")
    assert KEYFILE not in again.uploads("halo1")


def test_keyfile_with_wrong_mode_is_rewritten_and_reactivated() -> None:
    first = plan_both(cluster()).uploads("halo1")[KEYFILE]
    node = fresh_node(files={KEYFILE: (first, "644")}, active=["halo-data:enp194s0np0"])
    result = plan_both(cluster(), node=node)
    assert KEYFILE in result.uploads("halo1")
    temp = "/etc/NetworkManager/system-connections/.halo-data.nmconnection.halo-new"
    assert any(
        c.startswith(f"chown root: {temp} && chmod 600 {temp} && ")
        and c.endswith(f"mv -f {temp} {KEYFILE}")
        for c in result.commands("halo1")
    )


def test_roce_keyfile() -> None:
    keyfile = plan_both(cluster()).uploads("halo1")[KEYFILE]
    assert "interface-name=enp194s0np0\n" in keyfile
    for line in (
        "type=ethernet",
        "autoconnect=true",
        "zone=trusted",
        "mtu=9000",
        "method=manual",
        "address1=192.168.100.1/30",
        "never-default=true",
        "method=disabled",
        "autoconnect-priority=100",
    ):
        assert f"\n{line}\n" in keyfile
    assert "mac-address" not in keyfile
    # NetworkManager's pause-* would turn pause autonegotiation off, which ice refuses
    assert "\n[ethtool]\n" not in keyfile and "\npause-" not in keyfile


def test_keyfile_bound_by_mac() -> None:
    result = plan_by_mac()
    keyfile = result.uploads("halo1")[KEYFILE]
    assert "mac-address=6c:fe:54:00:00:01\n" in keyfile
    assert "interface-name" not in keyfile
    assert "Data link | Activate halo-data on enp194s0np0" in result.names("halo1")


def test_thunderbolt_plan() -> None:
    tb = {
        "name": "thunderbolt0",
        "mac": "02:a1:59:56:2c:c2",
        "vendor": "-",
        "device": "-",
        "driver": "thunderbolt-net",
        "addresses": ["169.254.205.206/16"],
    }
    node = fresh_node(interfaces=[LOOPBACK, MGMT, tb])
    result = plan(cluster(interconnect="thunderbolt", data="{}"), {"halo1": node, "halo2": node})
    uploads = result.uploads("halo1")
    assert uploads["/etc/modules-load.d/thunderbolt-net.conf"].splitlines()[-1] == "thunderbolt_net"
    # bound to the host-to-host link itself (thunderbolt-net's), not to its name
    assert "\n[match]\n" in uploads[KEYFILE] and "\ndriver=thunderbolt-net\n" in uploads[KEYFILE]
    assert "interface-name" not in uploads[KEYFILE]
    assert "address1=192.168.2.1/30\n" in uploads[KEYFILE]
    assert "[ethtool]" not in uploads[KEYFILE]


def test_thunderbolt_missing_interface_writes_files_without_activation() -> None:
    node = fresh_node(interfaces=[LOOPBACK, MGMT])
    result = plan(cluster(interconnect="thunderbolt", data="{}"), {"halo1": node, "halo2": node})
    assert "\ndriver=thunderbolt-net\n" in result.uploads("halo1")[KEYFILE]
    assert not any(name.startswith("Data link | Activate") for name in result.names("halo1"))


def test_refuses_the_interface_that_carries_ssh() -> None:
    c = cluster(data="{interface: eno1}")
    result = plan_both(c)
    assert "eno1 carries the SSH session (10.0.0.11)" in refusal(result)
    assert "eno1 carries the SSH session" in refusal(result, "halo2")


def test_refuses_when_route_back_to_the_operator_leaves_by_the_data_interface() -> None:
    command = refusal(plan_both(cluster(), sessions=["10.0.0.11 enp194s0np0"]))
    assert "enp194s0np0 carries the SSH session" in command


def test_auto_without_e810_lists_what_was_found() -> None:
    command = refusal(plan_both(cluster(), interfaces=[LOOPBACK, MGMT]))
    assert "interface auto: no E810 port" in command
    assert "eno1 (0x10ec:0x8125 r8169)" in command


def test_auto_with_two_e810_ports_is_ambiguous() -> None:
    second = dict(E810, name="enp194s0f1np1", mac="6c:fe:54:00:00:02")
    command = refusal(plan_both(cluster(), interfaces=[LOOPBACK, MGMT, E810, second]))
    assert "2 E810 ports (enp194s0f1np1, enp194s0np0)" in command


def test_missing_named_interface_is_refused() -> None:
    command = refusal(plan_both(cluster(data="{interface: enp1s0f0np0}")))
    assert "interface enp1s0f0np0 not found" in command


def test_not_fedora_is_refused() -> None:
    debian = ['PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"', "ID=debian", 'VERSION_ID="12"']
    command = refusal(plan_both(cluster(), files={"/etc/os-release": "\n".join(debian)}))
    assert "not Fedora (Debian GNU/Linux 12 (bookworm))" in command


@pytest.mark.parametrize("policy", ["never", "if-needed"])
def test_reboot_policy(policy: str) -> None:
    result = plan_both(cluster(f"reboot: {policy}\n"))
    for node, role in (("halo1", "head"), ("halo2", "worker")):
        reboots = [n for n in result.names(node) if n.startswith("Reboot | Reboot")]
        assert reboots == (
            [f"Reboot | Reboot {role} for kernel arguments"] if policy == "if-needed" else []
        )


def test_workers_reboot_before_the_head() -> None:
    result = plan_both(cluster("reboot: if-needed\n"))
    order = [op.name for op in result.ops["halo2"]] + [op.name for op in result.ops["halo1"]]
    assert order.index("Reboot | Reboot worker for kernel arguments") < order.index(
        "Reboot | Reboot head for kernel arguments"
    )
    assert result.names("halo1")[-1] == "Reboot | Confirm the kernel arguments are active"


def test_active_arguments_need_no_reboot() -> None:
    """The node runs 6.18.5 (its InstalledVersions): the arguments for it, no amdgpu.gttsize."""
    running = f"BOOT_IMAGE=(hd0,gpt2)/vmlinuz-6.18.5-200.fc43.x86_64 ro {SEED_ARGS_6_15}"
    boot = {GRUB: fixture("etc-default-grub-rocky-cat.txt"), "/proc/cmdline": running}
    result = plan_both(cluster("reboot: if-needed\n"), node=fresh_node(boot=boot))
    assert not [n for n in result.names("halo1") if "Reboot" in n]


def test_a_gttsize_still_active_on_a_new_kernel_asks_for_a_reboot() -> None:
    """An earlier run wrote amdgpu.gttsize for the running 6.18.5: the next boot drops it."""
    running = f"BOOT_IMAGE=(hd0,gpt2)/vmlinuz-6.18.5-200.fc43.x86_64 ro {SEED_ARGS}"
    boot = {GRUB: fixture("etc-default-grub-rocky-cat.txt"), "/proc/cmdline": running}
    result = plan_both(cluster("reboot: if-needed\n"), node=fresh_node(boot=boot))
    assert "Reboot | Reboot head for kernel arguments" in result.names("halo1")


def test_gttsize_only_where_the_entry_s_kernel_takes_it() -> None:
    """A recorded Fedora 44 entry (7.1.10) gets ttm.pages_limit alone and loses the gttsize an
    earlier run wrote; a recorded Fedora 42 entry (6.14.0, before the deprecation in 6.15) keeps
    both; the GRUB defaults and /etc/kernel/cmdline, which the next kernels take, follow the
    newest."""
    f44 = fixture("bls-entry-fedora44-server-7.1.10.conf").replace(
        "$tuned_params", "$tuned_params amdgpu.gttsize=126976"
    )
    boot = {
        GRUB: fixture("etc-default-grub-rocky-cat.txt"),
        "/proc/cmdline": fixture("proc-cmdline-fedora43.txt"),
        ENTRY_F44: f44,
        ENTRY_F42: fixture("bls-entry-fedora42-workstation-annotated.conf"),
    }
    uploads = plan_both(cluster(), node=fresh_node(boot=boot)).uploads("halo1")
    assert (
        "options root=/dev/mapper/fedora-root ro rhgb quiet $tuned_params "
        + (f"{SEED_ARGS_6_15}\n")
        in uploads[ENTRY_F44]
    )
    options = next(line for line in uploads[ENTRY_F42].splitlines() if line.startswith("options"))
    assert options.endswith(f"$tuned_params {SEED_ARGS}"), options
    assert uploads[GRUB].count("amdgpu.gttsize") == 0
    assert SEED_ARGS_6_15 in uploads[GRUB]
    assert uploads["/etc/kernel/cmdline"].endswith(f"$tuned_params {SEED_ARGS_6_15}\n")


def test_a_node_on_a_new_kernel_converges_without_gttsize() -> None:
    """The recorded Fedora 44 entry (7.1.10) deployed once, its files fed back: the second run
    changes no kernel argument anywhere (no gttsize added back and taken away again)."""
    boot = {
        GRUB: fixture("etc-default-grub-rocky-cat.txt"),
        "/proc/cmdline": fixture("proc-cmdline-fedora43.txt"),
        ENTRY_F44: fixture("bls-entry-fedora44-server-7.1.10.conf"),
    }
    first = plan_both(cluster(), node=fresh_node(boot=boot)).uploads("halo1")
    assert "amdgpu.gttsize" not in first[ENTRY_F44] + first[GRUB] + first["/etc/kernel/cmdline"]
    again = dict(boot, **{p: first[p] for p in (GRUB, ENTRY_F44, "/etc/kernel/cmdline")})
    result = plan_both(cluster(), node=fresh_node(boot=again))
    kernel = [op for op in result.ops["halo1"] if op.name.startswith("Kernel arguments")]
    assert len(kernel) == 3, [op.name for op in result.ops["halo1"]]
    assert [op.uploads for op in kernel] == [{}] * len(kernel)
    assert [op.commands for op in kernel] == [[]] * len(kernel)
