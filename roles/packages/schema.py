"""The packages role has no key of its own: its packages come from every role's PACKAGES."""

from __future__ import annotations

from halo_cluster.config.schema import Field, variables

SECTION: tuple[Field, ...] = ()
# host data it reads beyond its section: other sections' keys, values hostdata.py derives
READS = ()
VARIABLES = variables(SECTION, READS)
