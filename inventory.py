"""pyinfra inventory built from cluster.yml (or the file named by $CLUSTER_CONFIG).

Groups: `head` and `workers`. Every derived value is already in each host's data; see
`pyinfra inventory.py debug-inventory`.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from halo_cluster.config import ConfigError, inventory_groups, load_cluster

_config = os.environ.get("CLUSTER_CONFIG") or str(Path(__file__).resolve().parent / "cluster.yml")
try:
    _groups = inventory_groups(load_cluster(_config))
except ConfigError as _error:
    print("\n".join(_error.problems), file=sys.stderr)
    # os._exit: pyinfra would otherwise wrap SystemExit in its own traceback output
    sys.stderr.flush()
    os._exit(2)

head = _groups["head"]
workers = _groups["workers"]
