"""The kernel role's keys: the kernel command line (`kernel.*`)."""

from __future__ import annotations

from halo_cluster.config import rules
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
# host data it reads beyond its section: other sections' keys, values hostdata.py derives
READS = (
    "halo_kernel_args",
    "halo_kernel_args_remove",
)
VARIABLES = variables(SECTION, READS)
