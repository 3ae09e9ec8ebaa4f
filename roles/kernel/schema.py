"""The kernel role's keys: the kernel command line (`kernel.*`), and the arguments they give."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from halo_cluster.config import rules
from halo_cluster.config.model import Cluster, Problems
from halo_cluster.config.schema import Field, variables

SECTION: tuple[Field, ...] = (
    Field("kernel", "mapping", {}, "Kernel command line arguments (see the `kernel.*` keys)."),
    Field(
        "kernel.gtt_gib",
        "integer",
        124,
        "GTT size in GiB; gives `amdgpu.gttsize=GiB*1024` "
        "and `ttm.pages_limit=GiB*262144` (124 gives 126976 and 32505856).",
        rule=rules.gtt_gib,
    ),
    Field(
        "kernel.iommu",
        "string",
        "pt",
        "`pt` adds `iommu=pt` (and removes `amd_iommu=off`); "
        "`off` adds `amd_iommu=off` (and removes `iommu=pt`).",
        ("pt", "off"),
    ),
    Field("kernel.pci_realloc", "boolean", True, "Add `pci=realloc` (false removes it)."),
    Field("kernel.pcie_aspm_off", "boolean", True, "Add `pcie_aspm=off` (false removes it)."),
    Field(
        "kernel.extra_args",
        "list of strings",
        [],
        "Further arguments to add, `key=value` or a bare flag.",
        rule=rules.kernel_argument,
    ),
    Field(
        "kernel.remove_args",
        "list of strings",
        [],
        "Arguments to remove: `key` removes every value of that key, `key=value` only that one.",
        rule=rules.kernel_argument,
    ),
)
# host data it reads beyond its section's keys: the arguments its `derive` below gives them
READS = (
    "halo_kernel_args",
    "halo_kernel_args_remove",
)
VARIABLES = variables(SECTION, READS)


@dataclass(frozen=True)
class Kernel:
    """The arguments the `kernel.*` keys give: host data `halo_kernel_args` and
    `halo_kernel_args_remove`, read by the kernel and reboot roles; and `halo_kernel_gtt_bytes`,
    the GTT those arguments give, which the memory budget and the preflight weigh."""

    args: tuple[str, ...]
    args_remove: tuple[str, ...]
    gtt_bytes: int


def gtt_kernel_args(gtt_gib: int) -> tuple[str, str]:
    """GTT size in GiB -> (amdgpu.gttsize in MiB, ttm.pages_limit in 4 KiB pages)."""
    mib = gtt_gib * 1024
    return f"amdgpu.gttsize={mib}", f"ttm.pages_limit={mib * 256}"


def derive(cluster: Cluster, problems: Problems, base_dir: Path) -> Kernel:
    keys = cluster.settings
    iommu_pt = keys["kernel.iommu"] == "pt"
    wanted: list[str] = ["iommu=pt" if iommu_pt else "amd_iommu=off"]
    remove: list[str] = ["amd_iommu=off" if iommu_pt else "iommu=pt"]
    toggles = {"kernel.pci_realloc": "pci=realloc", "kernel.pcie_aspm_off": "pcie_aspm=off"}
    for key, arg in toggles.items():
        (wanted if keys[key] else remove).append(arg)
    wanted.extend(gtt_kernel_args(keys["kernel.gtt_gib"]))
    # each argument passed its rule in the loader: one token, no quotes
    wanted.extend(keys["kernel.extra_args"])
    for i, arg in enumerate(keys["kernel.remove_args"]):
        if arg in wanted:
            problems.error(f"kernel.remove_args[{i}]", f"{arg!r} is also an argument to add")
        else:
            remove.append(arg)
    return Kernel(tuple(wanted), tuple(remove), keys["kernel.gtt_gib"] * 1024**3)
