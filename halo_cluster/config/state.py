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


def problem(given: str) -> str | None:
    """What is wrong with GIVEN as the state folder, said before any command's work (a file
    there would end the run in a traceback once it writes its reports), or None."""
    return unwritable(given, folder=True)


def unwritable(given: str, folder: bool = False) -> str | None:
    """What is wrong with GIVEN as a FOLDER (else a file) to be made or replaced: a file where
    a folder must be (or the other way), a path through a file, a folder that cannot be
    written; None when it can be written."""
    from halo_cluster.config.quoting import quote

    path = Path(given)  # its parents as given (a relative one ends in "."): said as typed
    found = next(p for p in (path, *path.parents) if p.exists())
    if found == path and path.is_dir() != folder:
        return f"{quote(given)}: is a {'file' if folder else 'folder'}: give a " + (
            "folder" if folder else "file's path"
        )
    if found != path and not found.is_dir():
        return f"{quote(given)}: is inside a file, {quote(str(found))}: give another path"
    writes = found if found.is_dir() else found.absolute().parent  # a file is replaced there
    if not os.access(writes, os.W_OK | os.X_OK):
        return f"{quote(given)}: {quote(str(writes))} is not writable: give a path you can write"
    return None
