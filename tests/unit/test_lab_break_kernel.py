"""`python -m lab break-kernel VERSION`: the lab boot loader's list holds `uname -r`'s form."""

from __future__ import annotations

import pytest

from lab import cli
from lab.sh import LabError


@pytest.mark.parametrize("given", ["6.18.16-200.fc43", "6.18.16-200.fc43.x86_64"])
def test_both_forms_name_the_release_the_boot_loader_compares(given: str) -> None:
    """The issue's form (as rpm and `upgrade --os` write it) matched no entry."""
    assert cli.kernel_release(given) == "6.18.16-200.fc43.x86_64"


def test_a_kernel_the_lab_does_not_offer_is_refused() -> None:
    with pytest.raises(
        LabError, match=r"break-kernel 6.18.17-200.fc43: the lab offers the kernels"
    ):
        cli.kernel_release("6.18.17-200.fc43")
