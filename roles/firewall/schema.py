"""The firewall role has no key of its own: it opens the port of the serve role's section."""

from __future__ import annotations

from halo_cluster.config.schema import Field, variables

SECTION: tuple[Field, ...] = ()
# host data it reads beyond its section: other sections' keys, values hostdata.py derives
READS = (
    "halo_serve_enabled",
    "halo_serve_listen",
    "halo_serve_port",
    "halo_role",
)
VARIABLES = variables(SECTION, READS)
