"""pyinfra inventory built from cluster.yml (or the file named by $CLUSTER_CONFIG).

Groups: `head` and `workers`. Every derived value is already in each host's data; see
`pyinfra inventory.py debug-inventory`.
"""

import logging
import os
import sys
from pathlib import Path

from halo_cluster import roles
from halo_cluster.config.hostdata import inventory_groups
from halo_cluster.config.loader import ConfigError, load_cluster
from halo_cluster.config.schema import use
from halo_cluster.tools.commands.exits import BAD_CONFIG

_config = os.environ.get("CLUSTER_CONFIG") or str(Path(__file__).resolve().parent / "cluster.yml")
# paramiko logs a failed handshake (a node that accepts but never greets) as a 25-line traceback
# from its own thread; pyinfra says the node's failure, and `halo-cluster deploy` its reason
logging.getLogger("paramiko").setLevel(logging.CRITICAL)
use(roles.schema())  # the cluster section and every role's: the keys cluster.yml may hold
try:
    _groups = inventory_groups(load_cluster(_config))
except ConfigError as _error:
    print("\n".join(_error.problems), file=sys.stderr)
    # os._exit, not sys.exit: pyinfra loads this file inside its own exception handling, which
    # prints a SystemExit raised here as "pyinfra error: ..." with a traceback under --debug
    sys.stderr.flush()
    os._exit(BAD_CONFIG)

head = _groups["head"]
workers = _groups["workers"]
