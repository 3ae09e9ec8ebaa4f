"""The tool's state folder: what the tool keeps between runs, in one place whatever the current
folder. `.halo-cluster/` beside the config file, unless $HALO_STATE names another folder (the
CLI's `--state DIR` sets it). It holds the lock (config/lock.py), Ray's token when the tool makes
it (roles/serve) and `reports/`: verify's JUnit XML, drift's summaries and the bench history
(docs/configuration.md, "The state folder").

Only a deploy writes the lock and the token; the read-only commands write their own reports
under `reports/` and nothing else.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "HALO_STATE"
NAME = ".halo-cluster"  # beside the config file, when $HALO_STATE is not set


def folder(config_folder: Path) -> Path:
    """The state folder of the config in `config_folder`: $HALO_STATE (relative to the current
    folder), else `.halo-cluster` in the config's own folder. The folder is resolved, the files
    in it are not (a symlink in the lock's place is the lock's reader's to judge)."""
    given = os.environ.get(ENV)
    return Path(given).resolve() if given else config_folder.resolve() / NAME
