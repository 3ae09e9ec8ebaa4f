"""The reboot role's keys: whether to reboot for kernel arguments, and how long to wait."""

from __future__ import annotations

from halo_cluster.config import rules
from halo_cluster.config.schema import Field, variables

SECTION: tuple[Field, ...] = (
    Field(
        "reboot",
        "string",
        "never",
        "`never`: only report nodes that need a reboot for kernel "
        "arguments; `if-needed`: reboot them one at a time, workers first.",
        ("never", "if-needed"),
    ),
    Field(
        "reboot_timeout",
        "integer",
        600,
        "Seconds a rebooted node may take to come back before the deploy fails it.",
        rule=rules.reboot_timeout,
    ),
)
# host data it reads beyond its section: other sections' keys, values hostdata.py derives
READS = (
    "halo_role",
    "halo_kernel_args",
    "halo_kernel_args_remove",
)
VARIABLES = variables(SECTION, READS)
