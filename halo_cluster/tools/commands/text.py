"""The help page every command prints, laid out one way: usage, what it does, its options, its
exit codes (exits.py), one example."""

from __future__ import annotations

import re
import shutil
import textwrap

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


def width() -> int:
    """The terminal's width ($COLUMNS, else the terminal's own), at most the pages' WIDTH; a
    page not shown on a terminal keeps its layout."""
    columns = shutil.get_terminal_size((exits.WIDTH + 1, 24)).columns - 1
    return max(40, min(exits.WIDTH, columns))


def fitted(page: str, at: int | None = None) -> str:
    """PAGE wrapped at AT columns (the terminal's, `width`): a paragraph of plain lines is
    filled again, an indented row (an option, an exit code, an example) wrapped under its own
    text column, its continuation lines joined to it first. A page that fits is as it is."""
    at = width() if at is None else at
    lines = page.splitlines()
    if all(len(line) <= at for line in lines):
        return page
    out: list[str] = []
    for block, indent in _blocks(lines):
        fill = textwrap.wrap(block, at, subsequent_indent=" " * indent, break_long_words=False,
                             break_on_hyphens=False)  # fmt: skip
        out.extend(fill or [""])
    return "\n".join(out)


def _blocks(lines: list[str]) -> list[tuple[str, int]]:
    """The page as blocks to fill, each with its continuation indent: a paragraph (plain lines
    up to an empty one, an indented one or one ending in a colon), an indented row and the
    lines below it indented to its text column; a usage line hangs under its first word."""
    blocks: list[tuple[str, int]] = []
    joining = False  # whether the line may join the block before it
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if blocks and joining and line.strip():
            text, hanging = blocks[-1]
            if (indent == 0 and hanging == 0) or (indent and indent == hanging):
                blocks[-1] = (f"{text} {line.strip()}", hanging)
                joining = not line.endswith(":")
                continue
        column = re.match(r"\s*\S+(?: \S+)*?\s{2,}(?=\S)", line) if indent else None
        hanging = (
            column.end() if column else len("usage: ") if line.startswith("usage: ") else indent
        )
        blocks.append((line, hanging))
        joining = bool(line.strip()) and not line.endswith(":") and not line.startswith("usage:")
    return blocks
