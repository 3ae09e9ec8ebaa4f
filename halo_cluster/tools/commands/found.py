"""The files the deploy, drift and verify run (project.files), or one line saying where they
were looked for."""

from __future__ import annotations

import sys

from halo_cluster.tools import project


def files(command: str) -> project.Files | None:
    found = project.files()
    if found is None:
        markers = ", ".join(project.MARKERS)
        print(
            f"halo-cluster {command}: no checkout of the project ({markers}) beside "
            f"{project.PACKAGE_PARENT}, nor the copy a wheel ships in {project.PACKAGE}: "
            "reinstall the package",
            file=sys.stderr,
        )
    return found
