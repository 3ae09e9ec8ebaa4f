"""The user role has no key of its own."""

from __future__ import annotations

from halo_cluster.config.schema import Field, variables

SECTION: tuple[Field, ...] = ()
# host data it reads beyond its section: other sections' keys, values hostdata.py derives
READS = (
    "halo_cluster_user",
    "halo_interconnect",
)
VARIABLES = variables(SECTION, READS)
