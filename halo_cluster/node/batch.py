"""One batched script, one parser: several commands run in one SSH command, each read back as if
run alone. Used by every reader of a node: the deploy's one read (node/reads.py, through
pyinfra), the verification's (tests/infra/target.py), `status`, `bench` and the OS upgrade
(tools/transport.py).

The script runs every command at once, each in its own subshell (an `exit` in one ends only
that one) with stdin closed, then prints for each in order
`@@halo-part INDEX STATUS STDOUT-BYTES STDERR-BYTES`, its stdout and its stderr. The byte counts
make the parse exact whatever a command prints (no final newline, a line that looks like a
header, binary); a cut output keeps the complete parts before the cut. `named`/`sections` give
the parts names (the wire keeps their order)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

MARK = "@@halo-part"
_HEADER = re.compile(rb"@@halo-part (\d+) (\d+) (\d+) (\d+)\n")
_CLOSE = re.compile(r'\) >"\$d/(\d+)" 2>"\$d/\1e" </dev/null & p\d+=\$!')
# what a name gets when the output stopped before its part (the node's shell died, a timeout)
NOT_RUN = -1


@dataclass(frozen=True)
class Part:
    """One command's exit status, stdout and stderr, as if it had run alone."""

    status: int
    stdout: bytes = b""
    stderr: bytes = b""

    @property
    def out(self) -> str:
        return self.stdout.decode(errors="replace")

    @property
    def err(self) -> str:
        return self.stderr.decode(errors="replace")

    @property
    def lines(self) -> list[str]:
        """stdout's lines as pyinfra reads a command's (split on newlines, none kept)."""
        text = self.out
        return text.removesuffix("\n").split("\n") if text else []

    @property
    def filled(self) -> list[str]:
        """stdout's lines that are not blank."""
        return [line for line in self.lines if line.strip()]


def script(commands: Iterable[str]) -> str:
    """The shell script that runs `commands` at once and prints each one's `Part`."""
    commands = list(commands)
    lines = ["d=$(mktemp -d) || exit 1"]
    for i, command in enumerate(commands):
        # the closing parenthesis on its own line: a command ending in a comment stays closed
        lines += [f"( {command}", f') >"$d/{i}" 2>"$d/{i}e" </dev/null & p{i}=$!']
    for i in range(len(commands)):
        lines += [
            f"wait $p{i}; s=$?",
            f'printf \'{MARK} {i} %d %d %d\\n\' $s $(wc -c <"$d/{i}") $(wc -c <"$d/{i}e")',
            f'cat "$d/{i}" "$d/{i}e"',
        ]
    lines.append('rm -rf "$d"')
    return "\n".join(lines) + "\n"


def split(output: str | bytes) -> list[Part]:
    """Each complete part of a `script`'s output, in order (text is taken as UTF-8, and as
    surrogate escapes where it was decoded with them: transport.py's)."""
    data = output if isinstance(output, bytes) else output.encode(errors="surrogateescape")
    parts: list[Part] = []
    at = 0
    while header := _HEADER.match(data, at):
        index, status, out, err = (int(g) for g in header.groups())
        start = header.end()
        if index != len(parts) or len(data) < start + out + err:
            break
        parts.append(Part(status, data[start : start + out], data[start + out : start + out + err]))
        at = start + out + err
    return parts


def joined(parts: Iterable[Part]) -> bytes:
    """What a `script` prints for these parts: the inverse of `split` (the tests' nodes)."""
    return b"".join(
        f"{MARK} {i} {p.status} {len(p.stdout)} {len(p.stderr)}\n".encode() + p.stdout + p.stderr
        for i, p in enumerate(parts)
    )


def commands_of(text: str) -> list[str]:
    """The one-line commands of a `script` (the plan harness names them when it has no answer)."""
    return [
        first[2:]
        for first, second in itertools.pairwise(text.split("\n"))
        if first.startswith("( ") and _CLOSE.fullmatch(second)
    ]


def named(commands: Mapping[str, str]) -> str:
    """`script` of named commands (their names stay here: `sections` reads them back)."""
    return script(commands.values())


def sections(output: str | bytes, names: Iterable[str]) -> dict[str, Part]:
    """Every name of a `named` script to its part, `NOT_RUN` with no output for those the
    output stopped before."""
    found = split(output)
    return {name: found[i] if i < len(found) else Part(NOT_RUN) for i, name in enumerate(names)}
