"""Every command's exit codes, declared once: the help pages print them, docs/ci.md's table
says the same (tests/unit/test_commands.py compares the two).

A bad config is ERROR for every command: 2 cannot say it, since it is drift's "something would
change" and status's "something is down"; 1 is each command's error already, and its one line per
problem says which. USAGE is halo-cluster's own usage error (no command, a bad `--config`) and
the deploy's (an option it does not know, or no terminal to confirm on without `--yes`); the
other commands' usage errors are their ERROR, before the config is read.
"""

from __future__ import annotations

OK, ERROR, USAGE = 0, 1, 2
BAD_CONFIG = ERROR
DRIFT = DOWN = 2
REGRESSION = 3
NO_CHECKS = 4  # verify: nothing to run (pytest's usage error, which it also is for verify)
ABORTED, ROLLED_BACK, NOT_SERVING = 5, 6, 7
INTERRUPTED = 130  # Ctrl-C, for every command but verify (pytest's own 2): 128 + SIGINT, as shells
NO_FIT = 2  # fit: the model does not fit, as drift's 2 is a change to make
WIDTH = 100  # of a help page's lines

_UPGRADE = (
    (OK, "upgraded, or nothing to do"),
    (
        ERROR,
        "refused before anything changed: a bad config or lock, not converged, a rejected "
        "build without --retry, a usage error",
    ),
    (
        ABORTED,
        "aborted before the switch: a node's pull or the old build's bench failed; the old "
        "build still serves",
    ),
    (ROLLED_BACK, "the gate failed: every node is back on the previous build, serving"),
    (NOT_SERVING, "not serving after the rollback"),
)

# command: (code, meaning) for each code it exits with
EXITS: dict[str, tuple[tuple[int, str], ...]] = {
    "halo-cluster": (
        (OK, "the command's own code, unchanged"),
        (USAGE, "no command, an unknown one, or a bad --config or --state"),
        (
            INTERRUPTED,
            "interrupted (Ctrl-C), said in one line; upgrade and rollback first say what they "
            "left on each node",
        ),
    ),
    "init": (
        (OK, "cluster.yml written"),
        (
            ERROR,
            "cluster.yml exists (without --force), no SSH key found, the config it would "
            "write refused, a usage error",
        ),
    ),
    "deploy": (
        (OK, "every node converged"),
        (ERROR, "a node refused or failed, a bad config, the deploy's files not found"),
        (
            USAGE,
            "an option the deploy does not know, a --limit/--exclude node not in the config, or "
            "no terminal to confirm on without --yes",
        ),
    ),
    "drift": (
        (OK, "nothing would change on any node"),
        (ERROR, "a bad config, a node unreachable or refused, a usage error"),
        (DRIFT, "drift: something would change"),
    ),
    "verify": (
        (OK, "every check passed"),
        (ERROR, "a check failed, or a bad config"),
        (2, "interrupted"),
        (
            NO_CHECKS,
            "the checks not installed (pip install 'halo-cluster[test]'), an option verify "
            "does not know, or a --limit/--exclude node not in the config",
        ),
    ),
    "status": (
        (OK, "everything is up"),
        (ERROR, "a node cannot be reached, a bad config, a usage error"),
        (DOWN, "something is down, or serving is off"),
    ),
    "where": (
        (OK, "printed"),
        (ERROR, "a bad config, a usage error"),
    ),
    "upgrade": _UPGRADE,
    "upgrade --os": (
        (OK, "every node upgraded"),
        (
            ERROR,
            "refused before anything changed: no target, a known-bad one, a bad config, a "
            "node unreachable, a usage error",
        ),
        (ABORTED, "a step failed, the line naming the node and the step"),
        (ROLLED_BACK, "a node's gate failed: it was rebooted into its old kernel"),
        (NOT_SERVING, "a node did not come back: power-cycle it"),
    ),
    "rollback": (
        (OK, "every node serves the previous build"),
        (ERROR, "no previous build, a bad config or lock, a usage error"),
        (ABORTED, "a node's pull failed"),
        (NOT_SERVING, "not serving after the rollback"),
    ),
    "bench": (
        (OK, "within tolerance, or a first run (the baseline)"),
        (
            ERROR,
            "not serving, a level failed or timed out, a node unreachable, a bad config, a "
            "usage error",
        ),
        (REGRESSION, "a regression: output tokens/s fell or failed requests rose"),
    ),
    "fit": (
        (OK, "the model fits at that TP x PP, length and concurrency"),
        (ERROR, "the model's files not found or unreadable, a bad config, a usage error"),
        (NO_FIT, "it does not fit: the line says by how much and the largest max_model_len"),
    ),
    "models": (
        (OK, "the recipes listed"),
        (ERROR, "a bad config, a recipe file of yours refused, a usage error"),
    ),
    "completion": (
        (OK, "the script printed"),
        (ERROR, "an unknown shell, a usage error"),
    ),
}


def lines(command: str) -> list[str]:
    """COMMAND's exit codes as the help pages print them, wrapped at WIDTH."""
    from textwrap import wrap  # here: only a help page needs it

    return [
        line
        for code, meaning in EXITS[command]
        for line in wrap(f"  {code}  {meaning}", WIDTH, subsequent_indent="     ")
    ]
