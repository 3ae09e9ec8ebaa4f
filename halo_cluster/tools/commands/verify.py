"""`halo-cluster verify`: pytest over the verification (tests/infra, or the wheel's copy), in
this process; pytest's exit code."""

from __future__ import annotations

import gc
import importlib.util
import os
import sys

from halo_cluster.tools import selection
from halo_cluster.tools.commands import exits, text

NAME = "verify"
PROG = f"halo-cluster {NAME}"
SUMMARY = "check the end state of every node"
OPTIONS = (
    ("-k WORDS", "only the checks whose names hold WORDS (as -k 'rdma and not perf')"),
    ("-x", "stop at the first failed check"),
    ("-v", "one line per check"),
    ("--json", "the summary as one JSON document on stdout"),
    *selection.OPTIONS,
)
HELP = text.page(
    "halo-cluster verify [-k WORDS] [-x] [-v] [--json] [--limit NODE] [--exclude NODE]",
    """
Checks every node as it is, changing nothing: packages, kernel arguments (configured and
active), the cluster user's limits, the firewall, the data link (full-size frames, the RDMA
link, its latency and bandwidth), the image and the toolbox and, with `serve.enabled`, Ray with
every node, vLLM's health and one completion. Each failed check says what it found and what it
expected; the summary names the nodes. A JUnit XML report goes to verify.xml in the state
folder's reports/ (.halo-cluster/ beside the config, or --state DIR). With --limit or --exclude
only the nodes left in are read and checked (a check that needs a node left out, as Ray with
every node, is not run), and one line names those left out.""",
    OPTIONS,
    NAME,
    "halo-cluster verify -k rdma",
)
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


def main(args: list[str]) -> int:
    from halo_cluster.tools import project
    from halo_cluster.tools.commands import found

    files = found.files(NAME)
    if files is None:
        return exits.NO_CHECKS
    if importlib.util.find_spec("pytest") is None:
        # pytest is the `test` extra: an install without it has the commands but not the checks
        print(
            f"{PROG}: pytest is missing: pip install 'halo-cluster[test]'",
            file=sys.stderr,
        )
        return exits.NO_CHECKS
    import pytest  # here: only verify needs it

    if (refused := _before_the_checks(args)) is not None:
        return refused
    junit = project.reports() / "verify.xml"
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
            pytest.main([*PYTEST_OPTIONS, str(files.verification), f"--junitxml={junit}", *args])
        )
    finally:
        gc.enable()
        os.chdir(before)


def _before_the_checks(args: list[str]) -> int | None:
    """Verify's exit code when it stops before the checks, else None: an option it does not
    take (its OPTIONS, pytest's own usage being many lines) or a bad selection, in one line
    (NO_CHECKS), a config the loader refuses (BAD_CONFIG), each before any host is contacted.
    On stderr before the checks: what the next deploy would record (a node that left, a token
    to rotate), as where, drift and status say it (verify writes no lock), and the nodes
    `--limit` and `--exclude` leave out."""
    from halo_cluster.tools import options, project

    parser = options.parser(PROG, None, exits.NO_CHECKS)
    parser.value("-k", "WORDS", "only the checks whose names hold WORDS")
    parser.flag("-x", "stop at the first failed check")
    parser.flag("-v", "one line per check")
    parser.flag("--json", "the summary as one JSON document on stdout")
    selection.add(parser)
    chosen = parser.parse_args(args)
    # as the checks load it: by its absolute path, which its problems name
    cluster = project.load_or_say(os.path.abspath(project.config()))
    if cluster is None:
        return exits.BAD_CONFIG
    if change := project.next_deploy(cluster):
        print(change, file=sys.stderr)
    nodes = selection.chosen(PROG, cluster, chosen)
    if nodes is None:
        return exits.NO_CHECKS
    if out := selection.left_out_line(PROG, selection.left_out(cluster, nodes)):
        print(out, file=sys.stderr)
    return None
