"""Where the deploy meets pyinfra beyond its documented API, in one place: every other module of
halo_cluster, the roles, deploy.py and inventory.py go through these functions
(tests/unit/test_layers.py fails on a use anywhere else; docs/architecture.md's table lists them
with their users). pyinfra is pinned to one minor release (constraints.txt) for these.

Each internal, where pyinfra 3.10 defines it, and why we need it:

`ctx_state` (pyinfra/context.py: the state's `ContextManager`; the module's documented members
    are its classes, not this variable): `run()`, the run's own `State`, not the `from pyinfra
    import state` proxy, which forwards to whichever run is current: the per-run caches (the
    reads, the snapshot, the events) are weak dictionaries keyed by the run.
`active_hosts` (pyinfra/api/state.py, set in `State.init`: an instance attribute the API
    reference does not list): `active(host)`, a node still in the run (reached, not refused),
    which the head weighs, copies to and compares versions with; `take_out` removes one.
`failed_hosts` (pyinfra/api/state.py, set in `State.init`, likewise): `take_out(host)` and
    `mark_failed(host)`, a refused node fails the run (exit 1) without `State.fail_hosts`, which
    raises once no host is left, so that every refused node still says its reason.
`_get_module` (pyinfra/context.py, `ContextObject._get_module`, private): `real_host(host)`, the
    Host behind `from pyinfra import host`; the proxy kept in `failed_hosts` points at no host
    once the run's context ends, and pyinfra's JSON report then fails on it.
`pyinfra_cli` (pyinfra_cli/main.py, the module the `pyinfra` command runs): `cli_running()`, the
    refusals' end line is printed at the CLI's exit, not in a process that only prepares a
    deploy (the plan tests); `cli_main()`, its `main`, for a tool that runs pyinfra's command
    in its own process (without colours for NO_COLOR, which pyinfra has no option for).
`--dry` (pyinfra_cli/cli.py: the option stays the CLI's, the State has no flag for it):
    `dry_run()`, from the command line, so that what a deploy writes on the controller while it
    is planned (a lock adopted from the head) is not written by a dry run.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from pyinfra.context import ctx_state

CLI_MODULE = "pyinfra_cli.main"


def run() -> Any:
    """The State of the run in progress."""
    return ctx_state.get()


def active(host: Any) -> bool:
    """Whether `host` is still in the run: reached, and neither refused nor failed."""
    return host in run().active_hosts


def take_out(host: Any) -> None:
    """Fail `host` and leave it out of the rest of the run, the others running on."""
    state = run()
    state.failed_hosts.add(host)
    state.active_hosts.discard(host)


def mark_failed(host: Any) -> None:
    """Fail `host` (the run exits 1) and let it run on."""
    run().failed_hosts.add(host)


def real_host(host: Any) -> Any:
    """The Host behind pyinfra's context proxy, or `host` itself when it is none."""
    module = getattr(host, "_get_module", None)
    return module() if callable(module) and module() is not None else host


def cli_main() -> Callable[[], Any]:
    """pyinfra's command (`python -m pyinfra`), to run in this process."""
    from pyinfra_cli.main import main  # here: only a process that runs the command loads it

    return main


def cli_running() -> bool:
    """Whether this process is the pyinfra command (not a test preparing a deploy)."""
    return CLI_MODULE in sys.modules


def dry_run() -> bool:
    """Whether this run only plans (`pyinfra --dry`: `halo-cluster drift` and `deploy --dry` both
    pass it on the command line)."""
    return "--dry" in sys.argv[1:]
