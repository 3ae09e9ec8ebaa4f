"""`halo-cluster upgrade --os` without its phases: the gate on recorded outputs
(halo_cluster/tools/upgrading/osgate.py), the scripts and the deploy's data (kernels.py), the
targets' refusal before any read (osmain.py), and the lab's boot loader it drives."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from pyinfra_cli.util import parse_cli_arg

from halo_cluster.config.hostdata import host_data
from halo_cluster.decide import cmdline
from halo_cluster.node.versions import versions_process
from halo_cluster.tools import project
from halo_cluster.tools.upgrading import kernels, machine, osgate, osmain
from halo_cluster.tools.upgrading.kernels import Targets
from halo_cluster.tools.upgrading.machine import REFUSED
from halo_cluster.tools.upgrading.osgate import Observed
from tests.recorded import fixture, versions_output
from tests.unit.helpers_upgrade import (
    FIRMWARE,
    GOOD_FIRMWARE,
    NEW,
    OLD,
    cluster_of,
    entry,
    observed_output,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cluster(tmp_path: Path):
    return cluster_of(tmp_path)


# the gate on recorded outputs


def recorded_observed(rdma: str = "", cmdline: str | None = None, **link) -> Observed:
    text = observed_output(
        "6.18.7-200.fc43.x86_64",
        cmdline or fixture("proc-cmdline-fedora43.txt"),
        json.dumps([{"flags": ["UP", "LOWER_UP"], "mtu": 9000} | link]),
        rdma,
        "/dev/kfd",
        "20260110-1.fc43",
    )
    return osgate.observed(text, "enp23s0f1")


def test_the_gate_reads_the_kernel_arguments_from_proc_cmdline(cluster) -> None:
    after = recorded_observed()
    failed = osgate.gate_failure(cluster, "enp23s0f1", Targets(None, None), after, after)
    # the gate judges the arguments for the kernel it booted, 6.18.7: no amdgpu.gttsize
    assert failed == (
        "kernel arguments not active: iommu=pt pci=realloc pcie_aspm=off ttm.pages_limit=32505856"
    )


def test_the_gate_wants_a_gttsize_an_earlier_run_wrote_gone_on_a_new_kernel(cluster) -> None:
    args = f"{fixture('proc-cmdline-fedora43.txt').strip()} {' '.join(cluster.kernel.args)}"
    after = recorded_observed(cmdline=args)
    failed = osgate.gate_failure(cluster, "enp23s0f1", Targets(None, None), after, after)
    assert failed == "kernel arguments not active: -amdgpu.gttsize=126976"


def test_the_gate_fails_on_an_rdma_port_active_before_and_not_after(cluster) -> None:
    wanted = cmdline.for_kernel("6.18.7-200.fc43.x86_64", cluster.kernel.args, [])[0]
    args = f"{fixture('proc-cmdline-fedora43.txt').strip()} {' '.join(wanted)}"
    recorded = fixture("rdma-link-irdma-legacy-names.txt")
    before = recorded_observed(recorded, args)
    after = recorded_observed(recorded.replace("state ACTIVE", "state DOWN"), args)
    targets = Targets("6.18.7-200.fc43", "20260110-1.fc43")
    assert before.rdma_active
    assert osgate.gate_failure(cluster, "enp23s0f1", targets, before, before) is None
    failed = osgate.gate_failure(cluster, "enp23s0f1", targets, before, after)
    assert failed == "no RDMA device is ACTIVE (one was before the reboot)"
    mtu = osgate.gate_failure(
        cluster, "enp23s0f1", targets, before, recorded_observed(recorded, args, mtu=1500)
    )
    assert mtu == "data link enp23s0f1 has MTU 1500, not 9000"


def test_the_boot_entry_id_is_the_file_name_without_conf() -> None:
    files = [f"{entry('6.18.5-200.fc43')}.conf", f"{entry(OLD)}.conf"]
    assert kernels.entry_id(files, f"{OLD}.x86_64") == entry(OLD)
    assert kernels.entry_id(files, f"{NEW}.x86_64") is None


# the lab's grub2-editenv stand-in keeps GRUB's block format


def editenv(path: Path, *args: str) -> str:
    tool = ROOT / "lab/rootfs/usr/local/sbin/grub2-editenv"
    return subprocess.run(
        [str(tool), str(path), *args], capture_output=True, text=True, check=True
    ).stdout


def test_the_lab_grubenv_is_grub_s_1024_byte_block(tmp_path: Path) -> None:
    env = tmp_path / "grubenv"
    editenv(env, "set", f"saved_entry={entry(OLD)}")
    editenv(env, "set", f"next_entry={entry(NEW)}")
    assert editenv(env, "list") == f"saved_entry={entry(OLD)}\nnext_entry={entry(NEW)}\n"
    editenv(env, "unset", "next_entry")
    data = env.read_bytes()
    assert len(data) == 1024 and data.startswith(b"# GRUB Environment Block\n")
    assert data.rstrip(b"#").endswith(f"saved_entry={entry(OLD)}\n".encode())


# the review of issue 27 (m25)


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["--firmware", "20251125-1.fc43.noarch"],
            "halo-cluster upgrade --os: --firmware: '20251125-1.fc43.noarch' ends in the arch "
            ".noarch (give it without the arch: 20260110-1.fc43)",
        ),
        (
            ["--kernel", "6.18.9-200.fc43.x86_64"],
            "halo-cluster upgrade --os: --kernel: '6.18.9-200.fc43.x86_64' ends in the arch "
            ".x86_64 (give it without the arch: 6.18.9-200.fc43)",
        ),
        (
            ["--kernel", "6.18.9"],
            "halo-cluster upgrade --os: --kernel: '6.18.9' is not [EPOCH:]VERSION-RELEASE of "
            "letters, digits and . _ + ~ ^ (give it as rpm prints it, without the arch: "
            "6.18.9-200.fc43)",
        ),
        ([], "halo-cluster upgrade --os: give --kernel VERSION, --firmware VERSION or both"),
    ],
)
def test_a_target_not_an_evr_without_arch_is_one_line_and_exit_1_before_any_read(
    argv: list[str], line: str, capsys, monkeypatch
) -> None:
    """A NEVRA's arch passed the known-bad list and installed that build on every node."""
    monkeypatch.setattr(project, "load", lambda _: pytest.fail("the config was read"))
    with pytest.raises(SystemExit) as stopped:
        osmain.main(["--os", *argv])
    assert stopped.value.code == REFUSED
    assert capsys.readouterr().err == f"{line}\n"


# the lab's boot loader chooses as GRUB's 00_header with GRUB_DEFAULT=saved


def choose(tmp_path: Path, kernels: list[str], **env: str) -> str:
    entries = tmp_path / "entries"
    entries.mkdir(exist_ok=True)
    for evr in kernels:
        (entries / f"{entry(evr)}.conf").write_text(f"version {evr}.x86_64\n")
    grubenv = tmp_path / "grubenv"
    for name, value in env.items():
        editenv(grubenv, "set", f"{name}={value}")
    tool = ROOT / "lab/rootfs/usr/local/libexec/lab-boot-choose"
    editor = str(ROOT / "lab/rootfs/usr/local/sbin/grub2-editenv")
    found = subprocess.run(
        [str(tool), str(entries), str(grubenv), editor], capture_output=True, text=True, check=True
    ).stdout.strip()
    return Path(found).name.removesuffix(".conf")


def test_the_lab_boots_next_entry_once_then_saved_entry(tmp_path: Path) -> None:
    kernels = ["6.18.5-200.fc43", OLD, NEW]
    assert choose(tmp_path, kernels, saved_entry=entry(OLD), next_entry=entry(NEW)) == entry(NEW)
    assert choose(tmp_path, kernels) == entry(OLD)  # next_entry used up


def test_a_next_entry_naming_no_entry_boots_entry_0_not_saved_entry(tmp_path: Path) -> None:
    """GRUB sets default to next_entry whatever it names; an unknown one is entry 0, the
    newest version in blscfg's order."""
    kernels = ["6.18.5-200.fc43", OLD, NEW]
    gone = entry("6.18.16-200.fc43")
    assert choose(tmp_path, kernels, saved_entry=entry(OLD), next_entry=gone) == entry(NEW)


def test_the_firmware_install_rebuilds_the_initramfs_of_the_kernel_the_trial_boots() -> None:
    info = versions_process(
        versions_output(
            f"{OLD}.x86_64", [f"kernel-core-{OLD}.x86_64", f"amd-gpu-firmware-{FIRMWARE}.noarch"]
        )
    )
    script = kernels.firmware_script(info, Targets(NEW, GOOD_FIRMWARE), f"{NEW}.x86_64")
    assert f"install amd-gpu-firmware-{GOOD_FIRMWARE}\n" in script
    assert f"dracut -f --kver {NEW}.x86_64;" in script
    prepared = kernels.prepare_script(info, Targets(NEW, GOOD_FIRMWARE), entry(OLD))
    assert "firmware" not in prepared


def test_the_deploy_gives_the_os_role_the_targets_as_host_data(cluster) -> None:
    """pyinfra reads `--data KEY=VALUE` as JSON: the os role's value the inventory sets."""
    argv = machine.deploy_argv(kernels.deploy_data(Targets(NEW, "20260110-1.fc43")))
    given = dict(argv[i + 1].split("=", 1) for i, word in enumerate(argv) if word == "--data")
    assert given["halo_reboot"] == "never"
    assert parse_cli_arg(given[kernels.UPGRADE_DATA]) == {
        "kernel-core": NEW,
        "amd-gpu-firmware": "20260110-1.fc43",
    }
    assert host_data(cluster, cluster.head)[kernels.UPGRADE_DATA] == {}
    firmware = machine.deploy_argv(kernels.deploy_data(Targets(None, "20260110-1.fc43")))
    assert f'{kernels.UPGRADE_DATA}={{"amd-gpu-firmware": "20260110-1.fc43"}}' in firmware
