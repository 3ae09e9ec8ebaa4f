"""The help page every command prints, laid out one way: usage, what it does, its options, its
exit codes (exits.py), one example."""

from __future__ import annotations

from halo_cluster.tools.commands import exits

Options = tuple[tuple[str, str], ...]  # (the option as typed, what it does)
CONFIG = ("--config PATH", "the cluster.yml to use (else $CLUSTER_CONFIG, else ./cluster.yml)")
STATE = ("--state DIR", "the state folder (else $HALO_STATE, else .halo-cluster/ by the config)")
GLOBAL = (CONFIG, STATE)  # every command takes them


def page(usage: str, about: str, options: Options, command: str, example: str, *more: str) -> str:
    """The page of COMMAND (its key in exits.EXITS), with the exit codes of its MORE forms
    (`upgrade --os`)."""
    variants = [
        line
        for form in more
        for line in ("", f"Exit codes of halo-cluster {form}:", *exits.lines(form))
    ]
    width = max(len(option) for option, _ in (*options, *GLOBAL))
    listed = [f"  {option:{width}}  {what}" for option, what in (*options, *GLOBAL)]
    return "\n".join(
        [
            f"usage: {usage}",
            "",
            about.strip(),
            "",
            "Options:",
            *listed,
            f"  {'-h, --help':{width}}  this page",
            "",
            "Exit codes:",
            *exits.lines(command),
            *variants,
            "",
            "Example:",
            f"  {example}",
        ]
    )


def names(options: Options) -> tuple[str, ...]:
    """The option names OPTIONS declare, as completion offers them (`--json-out PATH`: --json-out,
    `-y, --yes`: both)."""
    return tuple(word.split(" ")[0] for option, _ in options for word in option.split(", "))
