"""The firewall role has no key of its own: it opens the ports the serve and metrics roles'
sections derive."""

from __future__ import annotations

from halo_cluster.config.schema import Field, variables

SECTION: tuple[Field, ...] = ()
# host data it reads beyond its section: other sections' keys, values hostdata.py derives
READS = (
    # what the serve role derives (roles/serve/model.py), never its raw keys
    "halo_serve_exposed_port",
    "halo_serve_ray_listens",
    "halo_serve_master_port_listens",
    "halo_metrics_exposed_port",  # the metrics role's derivation (roles/metrics/model.py)
    "halo_role",
)
VARIABLES = variables(SECTION, READS)
