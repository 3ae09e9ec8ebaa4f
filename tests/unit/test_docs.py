"""The docs describe what exists: every role variable in its page's table, every make target."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from roles import container, kernel, launcher, network, packages, rdma, reboot, user

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("module", "page"),
    [
        (packages, "packages"),
        (kernel, "kernel"),
        (network, "network"),
        (user, "user"),
        (rdma, "rdma"),
        (container, "container"),
        (launcher, "launcher"),
        (reboot, "reboot"),
    ],
)
def test_every_role_variable_is_documented(module, page: str) -> None:
    doc = (ROOT / "docs" / "roles" / f"{page}.md").read_text()
    documented = set(re.findall(r"^\| `(halo_\w+)` \|", doc, re.MULTILINE))
    assert documented == set(module.DEFAULTS)


def test_readme_make_targets_exist() -> None:
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z-]+):", makefile, re.MULTILINE))
    readme = (ROOT / "README.md").read_text()
    for target in re.findall(r"`make ([a-z-]+)", readme):
        assert target in targets, target
