"""The commands of `halo-cluster`, one module each (docs/architecture.md, Tools).

Each module has NAME, SUMMARY (its line in `halo-cluster --help`), OPTIONS (what completion
offers), HELP (the page `halo-cluster NAME --help` prints) and `main(argv) -> int`. A module
imports what its command needs inside `main`: the dispatcher reads every module's help at start-up,
which must not import pyinfra, pytest or the config loader (`halo-cluster --help` in 0.2 s).
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

# in the order `halo-cluster --help` lists them: a new user's path first
NAMES = (
    "init",
    "deploy",
    "drift",
    "verify",
    "status",
    "where",
    "fit",
    "models",
    "upgrade",
    "rollback",
    "bench",
    "completion",
)


def command(name: str) -> ModuleType:
    """The module of command NAME (one of NAMES)."""
    return import_module(f"{__name__}.{name}")
