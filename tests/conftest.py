"""What every test needs first: the whole schema in use, as the entry points hand it to the
loader (inventory.py, the `halo-cluster` tools)."""

import os

from halo_cluster import roles
from halo_cluster.config.schema import use

use(roles.schema())

# CI runs the property tests on hypothesis's fixed seed: a landing never depends on the draw
# (a failure it finds on a free run is kept in .hypothesis and replayed first there)
# (hypothesis is the dev extra: the verification, which an installed tool runs, has none)
if os.environ.get("CI"):
    from hypothesis import settings

    settings.register_profile("ci", derandomize=True)
    settings.load_profile("ci")
