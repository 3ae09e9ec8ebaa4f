"""`--json`: one JSON document on stdout, whatever happens; everything else (the command's own
lines and those of the processes it starts: the deploy's, ssh's, pytest's) on stderr.

The dispatcher runs a command given `--json` inside `only_document`: file descriptor 1 is
stderr's for the whole run, the command hands its document to `emit`, which writes it to the
real stdout, and a command that ends without one (a bad or missing config, a usage error, an
option refused) gets the error document, whose `error` is the lines it said on stderr. Every
document starts with the fields of `COMMON` (commands/documents.py declares every field).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO

VERSION = 1  # documents.py's schema version: raised when a field changes its type or goes
KEPT_LINES = 20  # of what the command said on stderr, for an error document's `error`
# while stdout_to_stderr holds it: the real stdout's descriptor and Python's stdout object
_kept: list[tuple[int, TextIO]] = []
_emitted: list[str] = []  # the commands whose document was written in this process


def document(command: str, exit_code: int, error: str | None = None, **fields: Any) -> dict:
    """COMMAND's document: the common fields first, then its own."""
    return {"version": VERSION, "command": command, "exit_code": exit_code, "error": error,
            **fields}  # fmt: skip


def whole(command: str, fields: dict) -> dict:
    """COMMAND's document of FIELDS (with `exit_code`, and `error` when it has one)."""
    rest = {k: v for k, v in fields.items() if k not in ("exit_code", "error")}
    return document(command, fields["exit_code"], fields.get("error"), **rest)


def emit(command: str, fields: dict) -> None:
    """COMMAND's document of FIELDS (`whole`) on the real stdout."""
    text = json.dumps(whole(command, fields), indent=2) + "\n"
    _emitted.append(command)
    descriptor, stream = _kept[0] if _kept else (1, sys.stdout)
    try:  # a stream on descriptor 1 writes where 1 points now (stderr): the kept one instead
        on_one = stream.fileno() == 1
    except (OSError, ValueError, AttributeError):  # a stream of no file (a test's capture)
        on_one = False
    if _kept and on_one:
        sys.stderr.flush()
        os.write(descriptor, text.encode())
    else:
        stream.write(text)
        stream.flush()


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Within: file descriptor 1 is stderr's, for this process and every child it starts (a
    child inherits the descriptor, not Python's sys.stdout), and sys.stdout is sys.stderr;
    after: stdout again. Nested, the outer one holds."""
    if _kept:
        yield
        return
    sys.stdout.flush()
    _kept.append((os.dup(1), sys.stdout))
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout.flush()
        descriptor, sys.stdout = _kept.pop()
        os.dup2(descriptor, 1)
        os.close(descriptor)


def said() -> str | None:
    """What the command said on stderr so far, under `only_document`: the `error` of a
    document that stopped before its work; None elsewhere, or when it said nothing."""
    lines = sys.stderr.lines if isinstance(sys.stderr, _Said) else []
    return "\n".join(lines) or None


class _Said:
    """sys.stderr, keeping the last KEPT_LINES lines written through it."""

    def __init__(self, stream: TextIO) -> None:
        self.stream, self.lines, self.partial = stream, [], ""

    def write(self, text: str) -> int:
        *whole, self.partial = (self.partial + text).split("\n")
        self.lines = [*self.lines, *(line for line in whole if line.strip())][-KEPT_LINES:]
        return self.stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def only_document(command: str, run: Callable[[], int]) -> int:
    """RUN's exit code, with one document on stdout: its own, else the error document."""
    said = _Said(sys.stderr)
    sys.stderr, before = said, len(_emitted)
    try:
        with stdout_to_stderr():
            try:
                code = run()
            except SystemExit as stop:  # a usage error's exit, its line said
                code = stop.code if isinstance(stop.code, int) else 1
            if len(_emitted) == before:
                lines = [*said.lines, *([said.partial] if said.partial.strip() else [])]
                emit(command, {"exit_code": code, "error": "\n".join(lines) or "no document"})
    finally:
        sys.stderr = said.stream
    return code
