"""Managed blocks inside files that others own too (known_hosts): only our block changes."""

from __future__ import annotations

BEGIN = "# BEGIN halo-cluster (managed, do not edit)"
END = "# END halo-cluster"


def with_block(text: str | None, lines: list[str]) -> str:
    """`text` with our block's lines replaced where the block stands (appended when there is
    none), every other line kept where it is. Lines added after our block (OpenSSH's
    UpdateHostKeys appends the worker's other host keys at the end of known_hosts) are the
    user's: the block stays in front of them, so the file is unchanged when our lines are."""
    before: list[str] = []
    after: list[str] = []
    inside = seen = False
    for line in (text or "").splitlines():
        if line in (BEGIN, END):
            # our markers are never the user's; a second block is ours too and goes
            inside, seen = line == BEGIN, True
        elif not inside:
            (after if seen else before).append(line)
    # an unterminated block (END lost in a hand edit) runs to the end of the file: all ours
    return "\n".join([*before, BEGIN, *lines, END, *after]) + "\n"


def block_lines(text: str | None) -> list[str]:
    """The lines of our block in `text` (none when it has no block)."""
    lines = (text or "").splitlines()
    if BEGIN not in lines:
        return []
    inside = lines[lines.index(BEGIN) + 1 :]
    return inside[: inside.index(END)] if END in inside else inside
