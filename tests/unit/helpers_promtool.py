"""promtool for the unit tests: Debian's `promtool` package of the lab's suite, downloaded and
extracted once by lab/debs.py (apt-get download through the lab's own apt state), so a fresh
machine gets it from these files. Without it a test fails in CI and is skipped, saying why,
elsewhere (a machine with no mirror to reach)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from lab import debs
from lab.sh import LabError

PACKAGE = "promtool"


def promtool() -> Path:
    try:
        return debs.extracted(PACKAGE) / "usr" / "bin" / "promtool"
    except (LabError, OSError) as error:
        reason = f"promtool from Debian's {PACKAGE} package could not be had: {error}"
        if os.environ.get("CI"):
            pytest.fail(reason)
        print(reason)  # in the test's output too, not only in the skip summary
        pytest.skip(reason)


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """promtool's answer (its exit status and output), never raising on its failure."""
    return subprocess.run(
        [str(promtool()), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )
