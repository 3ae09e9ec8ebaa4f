"""`halo-cluster`: the tool's entry points, whose exit codes reach the caller unchanged (why a
script calls this and not make: docs/ci.md).

    halo-cluster [--config PATH] COMMAND [ARGS...]

The config is `--config PATH` (once, before or after COMMAND, never empty), else $CLUSTER_CONFIG,
else cluster.yml in the checkout (or, for an installed wheel, in the current directory). ARGS go
to the command: drift's, status's and bench's own options, pytest's for verify, pyinfra's for
deploy. deploy.py, inventory.py and the verification are the checkout's with an editable install,
else the wheel's own copy (`halo_cluster.tools.project`).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable

from halo_cluster.config.loader import ConfigError
from halo_cluster.config.quoting import quote
from halo_cluster.config.rules import file_path

# drift, status and where import pyinfra (a quarter of a second): each only when it runs
from halo_cluster.tools import options, project

ERROR = 1
USAGE = 2  # argparse's, halo-cluster's own usage error (a command's is its error code)
NO_CHECKOUT = 4  # pytest's usage error: there is nothing to run
# pytest's options for the checks, without what only costs start-up time: no plugin found by
# its entry point but testinfra's (hypothesis's and typeguard's, of the dev extra, which no check
# uses, and the scan of every installed package for them), no cache, no assertion rewriting
# (every check says what failed in its own message, which the summary shows either way), no
# gc.collect() at the end for unraisable exceptions (a full pass over every imported module's
# objects), and none of the builtin plugins the checks never use (doctests, pastebin, tmpdir,
# --setup-only/--setup-plan, --stepwise)
UNUSED_PLUGINS = (
    "cacheprovider",
    "unraisableexception",
    "doctest",
    "pastebin",
    "legacypath",
    "setuponly",
    "setupplan",
    "stepwise",
)
PYTEST_OPTIONS = [
    "-q",
    "--disable-plugin-autoload",
    "-p",
    "testinfra.plugin",
    "--assert=plain",
    *(word for plugin in UNUSED_PLUGINS for word in ("-p", f"no:{plugin}")),
]
# the same as a command line of this interpreter, for the tests and tools that run it apart
VERIFY = ["-m", "pytest", *PYTEST_OPTIONS]


def _files(command: str) -> project.Files | None:
    found = project.files()
    if found is None:
        markers = ", ".join(project.MARKERS)
        print(
            f"halo-cluster {command}: no checkout of the project ({markers}) beside "
            f"{project.PACKAGE_PARENT}, nor the copy a wheel ships in {project.PACKAGE}: "
            "reinstall the package",
            file=sys.stderr,
        )
    return found


def _env() -> dict[str, str]:
    """The environment for a run in another folder: the config's path made absolute."""
    return dict(os.environ, CLUSTER_CONFIG=os.path.abspath(project.config()))


def run_drift(args: list[str]) -> int:
    """The dry run (pyinfra over deploy.py): 0 converged, 2 drift, 1 error."""
    from halo_cluster.tools import drift

    found = _files("drift")
    return drift.main(args, found.entry) if found else drift.ERROR


def run_verify(args: list[str]) -> int:
    """The end state: pytest over the verification (tests/infra); pytest's exit code."""
    found = _files("verify")
    if found is None:
        return NO_CHECKOUT
    if importlib.util.find_spec("pytest") is None:
        # pytest is the `test` extra: an install without it has the commands but not the checks
        print(
            "halo-cluster verify: pytest is missing: pip install 'halo-cluster[test]'",
            file=sys.stderr,
        )
        return NO_CHECKOUT
    import pytest  # here: only verify needs it

    junit = project.ROOT / "reports" / "verify.xml"
    # in this process, not a new interpreter's: its start-up and the config loader's imports,
    # which the checks need too, are paid once
    os.environ["CLUSTER_CONFIG"] = os.path.abspath(project.config())
    before = os.getcwd()
    os.chdir(project.ROOT)
    # no garbage collection for these few seconds: its passes walk every object of pyinfra's and
    # the roles' imports again and again (a tenth of the verification's CPU time, a quarter when
    # checks fail, for about 2 MB more)
    gc.disable()
    try:
        return int(
            pytest.main([*PYTEST_OPTIONS, str(found.verification), f"--junitxml={junit}", *args])
        )
    finally:
        gc.enable()
        os.chdir(before)


def run_deploy(args: list[str]) -> int:
    """pyinfra over inventory.py and deploy.py; pyinfra's exit code. A run whose only refusals
    are a fresh head's missing skopeo runs once more (the packages role installed it)."""
    from halo_cluster.node import report

    found = _files("deploy")
    if found is None:
        return ERROR
    code, events = _deploy_once(found, args)
    if code != 0 and "--dry" not in args and report.only_skopeo_pending(events):
        print(
            "halo-cluster deploy: the head had no skopeo yet (installed in this run): "
            "deploying once more to resolve the image",
            file=sys.stderr,
        )
        code, _ = _deploy_once(found, args)
    return _image_update(args) if code == 0 and "--dry" not in args else code


def _deploy_once(found: project.Files, args: list[str]) -> tuple[int, list[dict]]:
    """One pyinfra run and the report events it wrote (to $HALO_REPORT's file when it names
    one, else to a file of its own)."""
    from halo_cluster.node import report

    argv = [*project.PYINFRA, *args, "inventory.py", "deploy.py"]
    env = _env()
    with tempfile.TemporaryDirectory(prefix="halo-deploy.") as folder:
        target = env.setdefault(report.REPORT_ENV, os.path.join(folder, "report.jsonl"))
        start = os.path.getsize(target) if os.path.exists(target) else 0
        code = subprocess.run(argv, cwd=found.entry, env=env).returncode
        return code, report.read_events(target, start)


# pyinfra's options that take nodes out of a run
LIMITING = ("--limit", "--exclude")


def limited(args: list[str]) -> bool:
    """Whether pyinfra's ARGS limit the run to some nodes (`--limit`, `--exclude`): the image
    upgrade then does not run, since it moves the whole cluster or nothing."""
    return any(arg in LIMITING or arg.startswith(tuple(f"{o}=" for o in LIMITING)) for arg in args)


def _image_update(args: list[str]) -> int:
    """`image_update: true`: after the deploy converged, the cluster-wide upgrade (its exit)."""
    try:
        cluster = project.load(project.config())
    except ConfigError:
        return 0  # the deploy that just passed loaded it: it cannot be refused now
    if not cluster.settings.get("image_update"):
        return 0
    if limited(args):
        print(
            "halo-cluster deploy: image_update: no upgrade in a run limited to some nodes "
            "(--limit, --exclude), since it moves every node: `halo-cluster upgrade` runs it"
        )
        return 0
    from halo_cluster.tools import upgrade

    return upgrade.main_upgrade([], converged=True)


def run_upgrade(args: list[str]) -> int:
    """The cluster-wide image upgrade, gated and rolled back on failure; with `--os` the kernel
    and firmware, each node booting them once before it keeps them (docs/ci.md): 0 upgraded or
    nothing to do, 1 refused, 5 aborted before a restart or reboot, 6 gate failed and rolled
    back, 7 not serving (or a node not back) after it."""
    if "--os" in args[: args.index("--") if "--" in args else len(args)]:
        from halo_cluster.tools import upgrade_os

        return upgrade_os.main(args)
    from halo_cluster.tools import upgrade

    return upgrade.main_upgrade(args)


def run_rollback(args: list[str]) -> int:
    """Every node back on the lock's previous build (docs/ci.md)."""
    from halo_cluster.tools import upgrade

    return upgrade.main_rollback(args)


def run_where(args: list[str]) -> int:
    """Where the serving cluster is: its URL, a curl line, the status command."""
    from halo_cluster.tools import where

    options.parser("halo-cluster where", where.__doc__, ERROR).parse_args(args)
    config = project.config()
    cluster = project.load_or_say(config)
    if cluster is None:
        return ERROR
    pending = project.next_deploy(cluster)
    print("\n".join([*([pending] if pending else []), *where.lines(cluster, config)]))
    return 0


def run_status(args: list[str]) -> int:
    """The serving cluster in one table: 0 up, 2 down, 1 unreachable or a bad config."""
    from halo_cluster.tools import status

    return status.main(args)


def run_bench(args: list[str]) -> int:
    """The image's own `vllm bench serve` against the cluster: 0 within tolerance or a
    baseline, 3 a regression, 1 an error (docs/bench.md)."""
    from halo_cluster.tools import bench

    return bench.main(args)


COMMANDS: dict[str, tuple[Callable[[list[str]], int], str]] = {
    "deploy": (run_deploy, "converge every node to cluster.yml (pyinfra inventory.py deploy.py)"),
    "drift": (run_drift, "what a deploy would change on each node, changing nothing"),
    "verify": (run_verify, "check the end state of every node (pytest over tests/infra)"),
    "status": (run_status, "the serving cluster in one table: Ray, each service, vLLM"),
    "where": (run_where, "where vLLM answers: its URL, a curl line, the status command"),
    "upgrade": (
        run_upgrade,
        "every node to the image's new build (pull, switch, gate); --os: kernel and firmware",
    ),
    "rollback": (run_rollback, "every node back on the previous build of the image"),
    "bench": (run_bench, "benchmark the serving cluster, keep and compare the results"),
}
DESCRIPTION = """Provision AMD Strix Halo machines into a vLLM cluster described by cluster.yml.

commands:
{commands}

The config is --config PATH (before or after COMMAND), else $CLUSTER_CONFIG, else cluster.yml in
the checkout (else the current folder). ARGS go to the command: drift's, status's and bench's
options, pytest's for verify, pyinfra's for deploy; after `--`, as they are. Each command's exit
codes, for scripts and CI: docs/ci.md."""


def _parser() -> options.Parser:
    commands = "\n".join(f"  {name:8} {text}" for name, (_, text) in COMMANDS.items())
    parser = options.parser(
        "halo-cluster",
        DESCRIPTION.format(commands=commands),
        USAGE,
        usage="halo-cluster [--config PATH] COMMAND [ARGS...]",
    )
    parser.add_argument("--config", metavar="PATH", action="append", help="the cluster.yml to use")
    parser.add_argument("command", nargs="?", metavar="COMMAND", help=argparse.SUPPRESS)
    parser.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def _config_after_command(args: list[str]) -> tuple[list[str], list[str]]:
    """Every `--config PATH` (or `--config=PATH`) given after COMMAND, and the other ARGS in
    their order (by hand: argparse may reorder what it does not know, pyinfra's and pytest's
    options). A `--` ends halo-cluster's options: what follows goes to the command as it is,
    without the `--` (pyinfra would read `-- --dry` as an inventory named `--dry`)."""
    configs, rest = [], []
    items = iter(args)
    for arg in items:
        if arg == "--":
            rest.extend(items)
        elif arg == "--config":
            value = next(items, None)
            configs.append(_parser().error("--config needs a PATH") if value is None else value)
        elif arg.startswith("--config="):
            configs.append(arg.partition("=")[2])
        else:
            rest.append(arg)
    return configs, rest


def _one_config(parser: options.Parser, configs: list[str]) -> str | None:
    """The one `--config`, a file's path: an empty one is an error (a script's unset variable
    must not deploy whatever $CLUSTER_CONFIG names), and so is a second one (which would win
    without a word)."""
    first = configs[0] if configs else None
    if problem := options.problem("--config", first, len(configs), file_path):
        parser.error(problem)
    return first


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    parsed = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if parsed.command not in COMMANDS:
        known = ", ".join(COMMANDS)
        given = f"unknown COMMAND {quote(parsed.command)}" if parsed.command else "no COMMAND"
        parser.error(f"{given}: give one of {known} (--help)")
    after, args = _config_after_command(parsed.args)
    config = _one_config(parser, [*(parsed.config or []), *after])
    if config is not None:
        # every command reads $CLUSTER_CONFIG, and so do the pytest and pyinfra it starts
        os.environ["CLUSTER_CONFIG"] = config
    run, _ = COMMANDS[parsed.command]
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
