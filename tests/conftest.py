"""What every test needs first: the whole schema in use, as the entry points hand it to the
loader (inventory.py, the `halo-cluster` tools)."""

from halo_cluster import roles
from halo_cluster.config.schema import use

use(roles.schema())
