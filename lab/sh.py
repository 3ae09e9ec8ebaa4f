"""Running host commands for the lab: fail loudly with the command and its error output."""

from __future__ import annotations

import subprocess
import time
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


def remove_in_background(folders: list[Path], parent: Path, prefix: str) -> None:
    """Move `folders` out of the way at once, into a new `parent/PREFIX-N`, and delete them in a
    detached process (with the folders of an earlier call that did not finish): tens of
    thousands of files take seconds to delete, which no next step waits for."""
    batch = parent / f"{prefix}{time.time_ns()}"
    for index, folder in enumerate(folders):
        batch.mkdir(parents=True, exist_ok=True)
        try:
            folder.rename(batch / f"{index}-{folder.name}")
        except OSError:  # another file system or a mount point: deleted here and now
            subprocess.run(["rm", "-rf", "--one-file-system", str(folder)], check=False)
    left = list(parent.glob(f"{prefix}*"))
    if not left:
        return
    subprocess.Popen(
        ["rm", "-rf", "--one-file-system", *map(str, left)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
