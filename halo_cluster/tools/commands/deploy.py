"""`halo-cluster deploy`: every node converged to cluster.yml (pyinfra over inventory.py and
deploy.py, whose exit code it returns); a run whose only refusals are a fresh head's missing
skopeo runs once more, and `image_update: true` runs the upgrade after a passed deploy."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from halo_cluster.tools.commands import exits, text

if TYPE_CHECKING:  # the help page is read without the config model or the transport
    from halo_cluster.config.model import Cluster
    from halo_cluster.tools import reach

NAME = "deploy"
SUMMARY = "converge every node to cluster.yml"
OPTIONS = (
    ("-y, --yes", "apply without asking (needed without a terminal: in a script or CI)"),
    ("--dry", "show what would change, change nothing"),
    ("--limit NODE", "only this node (its name in cluster.yml, exactly); repeatable"),
    ("--exclude NODE", "every node but this one; repeatable"),
    ("-v", "say more: each command run on the nodes"),
)
HELP = text.page(
    "halo-cluster deploy [OPTIONS]",
    """
Brings every node of cluster.yml to the state it describes: packages, kernel arguments, the data
link, the container image and, with `serve.enabled`, Ray and vLLM. It shows what it would change
and asks before changing it, unless given --yes. A node refused by the safety checks is named
with its reason on its own line; the other nodes are still deployed. With `image_update: true`
the cluster-wide upgrade runs after the deploy passed, and its exit code is the command's
(`halo-cluster upgrade --help`).""",
    OPTIONS,
    NAME,
    "halo-cluster deploy --dry   # then: halo-cluster deploy --yes",
)

# the deploy's options that skip its question: nothing is asked, so a missing terminal is fine
ANSWERED = ("-y", "--yes", "--dry", "--json", "--debug-facts", "--debug-operations")
SHORT_FLAGS = re.compile(r"-[a-zA-Z]+")  # "-vy": short flags together
LIMITING = ("--limit", "--exclude")  # the options that take nodes out of a run


def asks(args: list[str]) -> bool:
    """Whether a deploy with ARGS would ask before it changes anything."""
    bundled = any(SHORT_FLAGS.fullmatch(arg) and "y" in arg for arg in args)
    return not bundled and not any(arg in ANSWERED for arg in args)


def limited(args: list[str]) -> bool:
    """Whether ARGS limit the run to some nodes (`--limit`, `--exclude`): the image upgrade then
    does not run, since it moves the whole cluster or nothing."""
    return any(arg in LIMITING or arg.startswith(tuple(f"{o}=" for o in LIMITING)) for arg in args)


# pyinfra's options, from its own click command, in a child: importing pyinfra_cli here would
# patch this process for gevent (its package does at import)
PYINFRA_OPTIONS = (
    "import json; from pyinfra_cli.cli import cli; print(json.dumps([[[*p.opts, "
    "*p.secondary_opts], bool(p.is_flag or p.count)] for p in cli.params "
    "if p.param_type_name == 'option']))"
)


def unknown(args: list[str]) -> str | None:
    """The first of ARGS that pyinfra's deploy does not take (an option its command line does
    not declare, a word where no option takes it, an option without its value), or None. Said
    before pyinfra, whose usage is many lines, and before the terminal's question (`--bogus`
    is no answer to it)."""
    flags = {*text.names(OPTIONS), *ANSWERED} - set(LIMITING)
    valued = set(LIMITING)
    if not _first_unknown(args, flags, valued):
        return None  # the common case: no child needed
    import json
    import subprocess  # here: `halo-cluster --help` reads this module

    listed = subprocess.run(
        [sys.executable, "-c", PYINFRA_OPTIONS], capture_output=True, text=True, check=False
    )
    for names, flag in json.loads(listed.stdout or "[]"):
        (flags if flag else valued).update(names)
    return _first_unknown(args, flags, valued)


def _first_unknown(args: list[str], flags: set[str], valued: set[str]) -> str | None:
    words = iter(args)
    for arg in words:
        if arg.partition("=")[0] in valued:
            if "=" not in arg and next(words, None) is None:
                return arg
        elif not (
            arg in flags
            or (SHORT_FLAGS.fullmatch(arg) and all(f"-{letter}" in flags for letter in arg[1:]))
        ):
            return arg
    return None


def main(args: list[str]) -> int:
    if (wrong := unknown(args)) is not None:
        from halo_cluster.config.quoting import quote

        print(
            f"halo-cluster deploy: {quote(wrong)}: unknown argument, or an option without its "
            "value (halo-cluster deploy --help)",
            file=sys.stderr,
        )
        return exits.USAGE
    if asks(args) and not sys.stdin.isatty():
        print(
            "halo-cluster deploy: no terminal to ask on: give --yes to apply, or --dry to see "
            "what would change",
            file=sys.stderr,
        )
        return exits.USAGE
    from halo_cluster.node import report
    from halo_cluster.tools import reach
    from halo_cluster.tools.commands import found

    files = found.files(NAME)
    if files is None:
        return exits.ERROR
    cluster = _inputs(args)
    if isinstance(cluster, int):
        return cluster
    args = _exact(args)
    _move_old_lock(args)
    asked = set() if limited(args) else {n.name for n in cluster.nodes}
    with reach.meanwhile(cluster, asked) as probed:
        code, events = _deploy_once(files.entry, args)
        if code != 0 and "--dry" not in args and report.only_skopeo_pending(events):
            print(
                "halo-cluster deploy: the head had no skopeo yet (installed in this run): "
                "deploying once more to resolve the image",
                file=sys.stderr,
            )
            code, events = _deploy_once(files.entry, args)
        if code != 0 and asked:  # a limited run is not read: the nodes it left out were not tried
            _not_reached(cluster, events, probed)
    return _image_update(args) if code == 0 and "--dry" not in args else code


def _selection(args: list[str]) -> dict[str, list[str]]:
    """The names ARGS give `--limit` and `--exclude` (`--limit NODE`, `--limit=NODE`)."""
    given: dict[str, list[str]] = {option: [] for option in LIMITING}
    items = iter(args)
    for arg in items:
        name, equals, value = arg.partition("=")
        if arg in LIMITING:
            given[arg].append(next(items, ""))
        elif equals and name in LIMITING:
            given[name].append(value)
    return given


def _inputs(args: list[str]) -> Cluster | int:
    """The config and the nodes `--limit`/`--exclude` name, checked here before pyinfra reaches
    any node: the config, or the exit code once its problems or the selection's are said (an
    unknown name, which pyinfra reads as a group or glob matching nothing, would deploy no
    node and exit 0)."""
    from halo_cluster.tools import project, selection

    cluster = project.load_or_say(project.config())
    if cluster is None:
        return exits.BAD_CONFIG
    given = _selection(args)
    try:
        selection.select(cluster, given["--limit"], given["--exclude"])
    except selection.Refused as refused:
        print(f"halo-cluster deploy: {refused}", file=sys.stderr)
        return exits.USAGE
    return cluster


def _exact(args: list[str]) -> list[str]:
    """ARGS with each `--limit`/`--exclude` name as pyinfra takes a name exactly (selection.py
    `pyinfra_name`: not the group `head` or `workers`)."""
    from halo_cluster.tools import selection

    out, items = [], iter(args)
    for arg in items:
        name, equals, value = arg.partition("=")
        if arg in LIMITING:
            out += [arg, selection.pyinfra_name(next(items, ""))]
        elif equals and name in LIMITING:
            out.append(f"{name}={selection.pyinfra_name(value)}")
        else:
            out.append(arg)
    return out


def _move_old_lock(args: list[str]) -> None:
    """A deploy that may write the lock first moves the one an older version kept beside the
    config into the state folder, in one line (config/lock.py `found`: the reads find either).
    Not a dry run's, which writes nothing, nor an upgrade's deploy, whose upgrade holds the lock
    where it found it."""
    from halo_cluster.config import lock
    from halo_cluster.tools import project

    if "--dry" in args or os.environ.get(lock.UPGRADING):
        return
    if moved := lock.move_old(Path(project.config()).absolute().parent):
        print(f"halo-cluster deploy: {moved}", file=sys.stderr)


def _not_reached(cluster: Cluster, events: list[dict], probed: reach.Probed) -> None:
    """One line per node the failed run did not reach, with SSH's reason (reach.py)."""
    from halo_cluster.tools import reach

    for line in reach.not_reached(cluster, events, probed):
        print(f"halo-cluster deploy: {line}", file=sys.stderr)


def _deploy_once(entry: os.PathLike, args: list[str]) -> tuple[int, list[dict]]:
    """One deploy and the report events it wrote (to the report file the environment names,
    else to one of its own)."""
    import subprocess
    import tempfile  # here, as subprocess: `halo-cluster --help` reads this module

    from halo_cluster.node import report
    from halo_cluster.tools import project

    argv = [*project.PYINFRA, *args, "inventory.py", "deploy.py"]
    env = dict(os.environ, CLUSTER_CONFIG=os.path.abspath(project.config()))
    with tempfile.TemporaryDirectory(prefix="halo-deploy.") as folder:
        target = env.setdefault(report.REPORT_ENV, os.path.join(folder, "report.jsonl"))
        start = os.path.getsize(target) if os.path.exists(target) else 0
        code = _own_interrupt(lambda: subprocess.run(argv, cwd=entry, env=env).returncode)
        return code, report.read_events(target, start)


def _own_interrupt(run: Callable[[], int]) -> int:
    """RUN's exit code, a Ctrl-C meanwhile left to pyinfra (the terminal sends it there too),
    which ends its run itself, and raised here once it has: pyinfra answers one at its prompt
    with exit 0, which would read as a converged cluster (and run image_update's upgrade)."""
    import signal

    interrupted: list[int] = []
    before = signal.signal(signal.SIGINT, lambda number, _: interrupted.append(number))
    try:
        code = run()
    finally:
        signal.signal(signal.SIGINT, before)
    if interrupted:
        raise KeyboardInterrupt
    return code


def _image_update(args: list[str]) -> int:
    """`image_update: true`: after the deploy converged, the cluster-wide upgrade (its exit)."""
    from halo_cluster.config.loader import ConfigError
    from halo_cluster.tools import project

    try:
        cluster = project.load(project.config())
    except ConfigError:
        return exits.OK  # the deploy that just passed loaded it: it cannot be refused now
    if not cluster.settings.get("image_update"):
        return exits.OK
    if limited(args):
        print(
            "halo-cluster deploy: image_update: no upgrade in a run limited to some nodes "
            "(--limit, --exclude), since it moves every node: `halo-cluster upgrade` runs it"
        )
        return exits.OK
    from halo_cluster.tools.upgrading import imagemain

    return imagemain.main_upgrade([], converged=True)
