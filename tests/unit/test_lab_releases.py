"""The Fedora releases the lab presents (lab/releases.py): each as the real release says itself."""

from __future__ import annotations

import pytest

from lab import releases
from lab.sh import LabError
from tests.recorded import fixture


def test_fedora_43_says_itself_as_the_recorded_workstation_does() -> None:
    assert releases.RELEASES[43].os_release() == fixture("os-release-fedora43-workstation.txt")


@pytest.mark.parametrize("version", sorted(releases.RELEASES))
def test_each_release_names_its_own_version_and_end(version: int) -> None:
    fedora = releases.RELEASES[version]
    fields = dict(line.split("=", 1) for line in fedora.os_release().splitlines())
    assert fields["VERSION_ID"] == str(version)
    assert fields["SUPPORT_END"] == fedora.support_end
    assert (
        fields["DOCUMENTATION_URL"] == f'"https://docs.fedoraproject.org/en-US/fedora/f{version}/"'
    )
    assert all(kernel.endswith(f".fc{version}") for kernel in fedora.kernels)
    assert all(firmware.endswith(f".fc{version}") for firmware in fedora.firmwares)
    assert fedora.firmware in fedora.firmwares


def test_dnf5_where_fedora_has_only_dnf5_and_signatures_where_45_enforces_them() -> None:
    assert [v for v, r in releases.RELEASES.items() if r.dnf5] == [44, 45]
    assert [v for v, r in releases.RELEASES.items() if r.signed] == [45]
    assert releases.RELEASES[45].repos_dir == "/usr/share/dnf5/repos.d"


def test_an_unknown_release_is_refused_with_the_known_ones() -> None:
    assert releases.release(None) is releases.DEFAULT
    with pytest.raises(LabError, match=r"--fedora 42: the lab presents Fedora 43, 44, 45"):
        releases.release(42)
