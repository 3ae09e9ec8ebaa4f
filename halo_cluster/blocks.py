"""Managed blocks inside files that others own too (known_hosts): only our block changes."""

from __future__ import annotations

BEGIN = "# BEGIN halo-cluster (managed, do not edit)"
END = "# END halo-cluster"


def with_block(text: str | None, lines: list[str]) -> str:
    """`text` with our block replaced (or appended), every other line kept."""
    kept: list[str] = []
    inside = False
    for line in (text or "").splitlines():
        if line == BEGIN:
            inside = True
        elif line == END:
            inside = False
        elif not inside:
            kept.append(line)
    return "\n".join([*kept, BEGIN, *lines, END]) + "\n"
