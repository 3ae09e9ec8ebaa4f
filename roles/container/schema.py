"""The container role's key: whether to pull the image again."""

from __future__ import annotations

from halo_cluster.config.schema import Field, variables

SECTION: tuple[Field, ...] = (
    Field("image_update", "boolean", False, "Pull the image again even when it is present."),
)
# host data it reads beyond its section: other sections' keys, values hostdata.py derives
READS = (
    "halo_cluster_user",
    "halo_image",
    "halo_toolbox",
)
VARIABLES = variables(SECTION, READS)
