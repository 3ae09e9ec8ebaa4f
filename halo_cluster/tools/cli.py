"""`halo-cluster`: the tool's entry points, whose exit codes reach the caller unchanged.

    halo-cluster [--config PATH] COMMAND [ARGS...]

make turns every failure of a recipe into its own exit 2, so a CI job that must tell drift (2)
from an error (1) calls this, never `make drift`. The config is `--config PATH` (before or after
COMMAND), else $CLUSTER_CONFIG, else cluster.yml in the checkout. ARGS go to the command:
drift's and status's own options, pytest's for verify, pyinfra's for deploy.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable

from halo_cluster.config.loader import ConfigError
from halo_cluster.tools import drift, project, status, where

ERROR = 1
NO_CHECKOUT = 4  # pytest's usage error: there is nothing to run
# pytest over the checks, run in the checkout, without what only costs start-up time:
# hypothesis's plugin (the dev extra; no check uses it) and assertion rewriting (every check
# says what failed in its own message, which the summary shows either way)
VERIFY = [
    "-m",
    "pytest",
    "tests/infra",
    "-q",
    "-p",
    "no:cacheprovider",
    "-p",
    "no:hypothesispytest",
    "--assert=plain",
]


def _checkout(command: str) -> str | None:
    root = project.checkout()
    if root is None:
        markers = ", ".join(project.MARKERS)
        print(
            f"halo-cluster {command}: no checkout of the project ({markers}) beside "
            f"{project.PACKAGE_PARENT} or in {os.getcwd()}: run it in the checkout",
            file=sys.stderr,
        )
    return str(root) if root else None


def _env() -> dict[str, str]:
    """The environment for a run in the checkout: a config path relative to here made absolute."""
    config = os.environ.get("CLUSTER_CONFIG")
    return dict(os.environ, **({"CLUSTER_CONFIG": os.path.abspath(config)} if config else {}))


def run_drift(args: list[str]) -> int:
    """The dry run (pyinfra in the checkout): 0 converged, 2 drift, 1 error."""
    return drift.main(args) if _checkout("drift") else drift.ERROR


def run_verify(args: list[str]) -> int:
    """The end state: pytest over tests/infra of the checkout; pytest's exit code."""
    root = _checkout("verify")
    if root is None:
        return NO_CHECKOUT
    if importlib.util.find_spec("pytest") is None:
        # pytest is the `test` extra: an install without it has the commands but not the checks
        print(
            "halo-cluster verify: pytest is missing: pip install 'halo-cluster[test]'",
            file=sys.stderr,
        )
        return NO_CHECKOUT
    junit = os.path.join(root, "reports", "verify.xml")
    argv = [sys.executable, *VERIFY, f"--junitxml={junit}", *args]
    return subprocess.run(argv, cwd=root, env=_env()).returncode


def run_deploy(args: list[str]) -> int:
    """pyinfra over the checkout's inventory.py and deploy.py; pyinfra's exit code."""
    root = _checkout("deploy")
    if root is None:
        return ERROR
    pyinfra = os.path.join(os.path.dirname(sys.executable), "pyinfra")
    argv = [pyinfra, *args, "inventory.py", "deploy.py"]
    return subprocess.run(argv, cwd=root, env=_env()).returncode


def run_where(args: list[str]) -> int:
    """Where the serving cluster is: its URL, a curl line, the status command."""
    argparse.ArgumentParser(prog="halo-cluster where", description=where.__doc__).parse_args(args)
    config = os.environ.get("CLUSTER_CONFIG") or str(project.ROOT / "cluster.yml")
    try:
        cluster = project.load(config)
    except ConfigError as error:
        print("\n".join(error.problems), file=sys.stderr)
        return ERROR
    print("\n".join(where.lines(cluster, config)))
    return 0


COMMANDS: dict[str, tuple[Callable[[list[str]], int], str]] = {
    "drift": (run_drift, "dry-run diff per node: exit 0 converged, 2 drift, 1 error"),
    "status": (status.main, "the serving cluster: exit 0 up, 2 something down, 1 unreachable"),
    "verify": (run_verify, "the end state (pytest over tests/infra): pytest's exit code"),
    "deploy": (run_deploy, "converge (pyinfra inventory.py deploy.py): pyinfra's exit code"),
    "where": (run_where, "the serving cluster's URL, a curl line, status command"),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="halo-cluster",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(f"  {name:8} {text}" for name, (_, text) in COMMANDS.items()),
        allow_abbrev=False,
    )
    parser.add_argument("--config", help="the cluster.yml to use")
    parser.add_argument("command", choices=COMMANDS, metavar="COMMAND")
    parser.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def _config_after_command(args: list[str]) -> tuple[str | None, list[str]]:
    """`--config PATH` (or `--config=PATH`) given after COMMAND, and the other ARGS in their
    order (by hand: argparse may reorder what it does not know, pyinfra's and pytest's options)."""
    config, rest = None, []
    items = iter(args)
    for arg in items:
        if arg == "--config":
            config = next(items, None) or _parser().error("--config needs a PATH")
        elif arg.startswith("--config="):
            config = arg.partition("=")[2]
        else:
            rest.append(arg)
    return config, rest


def main(argv: list[str] | None = None) -> int:
    parsed = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    config, args = _config_after_command(parsed.args)
    config = config or parsed.config
    if config:
        # every command reads $CLUSTER_CONFIG, and so do the pytest and pyinfra it starts
        os.environ["CLUSTER_CONFIG"] = config
    run, _ = COMMANDS[parsed.command]
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
