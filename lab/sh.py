"""Running host commands for the lab: fail loudly with the command and its error output."""

from __future__ import annotations

import subprocess
from pathlib import Path


class LabError(Exception):
    """A lab step failed; the message is one line for the user."""


def run(
    *argv: str, check: bool = True, input: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, capture_output=True, text=True, input=input, cwd=cwd)
    if check and result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise LabError(
            f"{' '.join(argv[:4])}: exit {result.returncode}: {detail[-1] if detail else ''}"
        )
    return result


def ok(*argv: str) -> bool:
    return subprocess.run(argv, capture_output=True).returncode == 0
