"""The Fedora releases a lab node can present (`python -m lab up --fedora N`): what each one's
root filesystem is built from and what its repository offers (docs/lab.md, "Fedora releases").

Fedora has run dnf5 and RPM 6 since 41 and 44. Debian packages dnf5 (5.4.6) and rpm 6.1 from
forky on, so the nodes of 44 and 45 are forky roots running the real dnf5; 43 stays on the trixie
root with dnf 4 and its versionlock plugin, which the suite was built on, until the suite moves to
dnf5 (the lab's one known gap against a real Fedora 43, which runs dnf5).
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.sh import LabError

OLD_REPOS = "/etc/yum.repos.d"
DNF5_REPOS = "/usr/share/dnf5/repos.d"  # Fedora 45's repo files (fedora-coreos-tracker#2172)


@dataclass(frozen=True)
class Release:
    """One Fedora release as the lab presents it."""

    version: int
    support_end: str  # /etc/os-release SUPPORT_END
    suite: str  # the Debian suite of the nodes' root filesystem
    dnf5: bool  # the real dnf5 (as `dnf`), else dnf 4
    installed: tuple[str, ...]  # kernels a node starts with, in install order: the last boots
    offered: tuple[str, ...]  # kernels its repository offers beside them
    firmware: str  # the firmware set a node starts with
    firmwares: tuple[str, ...]  # every firmware set its repository offers, that one included
    repos_dir: str  # where the release keeps its repo files
    signed: bool  # rpm refuses a package without a valid signature (Fedora 45)

    @property
    def tag(self) -> str:
        """The folder name of this release's cached builds."""
        return f"f{self.version}"

    @property
    def kernels(self) -> tuple[str, ...]:
        return (*self.installed, *self.offered)

    def os_release(self) -> str:
        """/usr/lib/os-release as Fedora Workstation writes it (fedora-release's os-release;
        43's is the one recorded on a Fedora 43 Workstation, tests/unit/test_lab_releases.py)."""
        v = self.version
        return (
            'NAME="Fedora Linux"\n'
            f'VERSION="{v} (Workstation Edition)"\n'
            "RELEASE_TYPE=stable\n"
            "ID=fedora\n"
            f"VERSION_ID={v}\n"
            'VERSION_CODENAME=""\n'
            f'PRETTY_NAME="Fedora Linux {v} (Workstation Edition)"\n'
            'ANSI_COLOR="0;38;2;60;110;180"\n'
            "LOGO=fedora-logo-icon\n"
            f'CPE_NAME="cpe:/o:fedoraproject:fedora:{v}"\n'
            'DEFAULT_HOSTNAME="fedora"\n'
            'HOME_URL="https://fedoraproject.org/"\n'
            f'DOCUMENTATION_URL="https://docs.fedoraproject.org/en-US/fedora/f{v}/"\n'
            'SUPPORT_URL="https://ask.fedoraproject.org/"\n'
            'BUG_REPORT_URL="https://bugzilla.redhat.com/"\n'
            'REDHAT_BUGZILLA_PRODUCT="Fedora"\n'
            f"REDHAT_BUGZILLA_PRODUCT_VERSION={v}\n"
            'REDHAT_SUPPORT_PRODUCT="Fedora"\n'
            f"REDHAT_SUPPORT_PRODUCT_VERSION={v}\n"
            f"SUPPORT_END={self.support_end}\n"
            'VARIANT="Workstation Edition"\n'
            "VARIANT_ID=workstation\n"
        )


# The kernel and firmware versions are stand-ins named as Fedora names its builds; 43's are the
# ones docs/design/day-after.md section 7 names, 44's and 45's follow the field's
# (field-2026-12.md: 44 at 6.19 then 7.0.x, 45 at 7.x, 7.1.6 bad and fixed in 7.1.8).
RELEASES = {
    43: Release(
        version=43,
        support_end="2026-12-02",
        suite="trixie",
        dnf5=False,
        installed=("6.18.5-200.fc43", "6.18.6-200.fc43"),
        offered=("6.18.9-200.fc43", "6.18.16-200.fc43"),
        firmware="20251111-1.fc43",
        firmwares=("20251111-1.fc43", "20251125-1.fc43", "20260110-1.fc43"),
        repos_dir=OLD_REPOS,
        signed=False,
    ),
    44: Release(
        version=44,
        support_end="2027-05-19",
        suite="forky",
        dnf5=True,
        installed=("7.0.6-200.fc44", "7.0.7-200.fc44"),
        offered=("7.0.11-200.fc44",),
        firmware="20260410-1.fc44",
        firmwares=("20260410-1.fc44", "20260519-1.fc44"),
        repos_dir=OLD_REPOS,
        signed=False,
    ),
    45: Release(
        version=45,
        support_end="2027-12-08",
        suite="forky",
        dnf5=True,
        installed=("7.1.8-200.fc45", "7.1.9-200.fc45"),
        offered=("7.1.6-200.fc45", "7.1.10-200.fc45"),
        firmware="20260910-1.fc45",
        firmwares=("20260910-1.fc45",),
        repos_dir=DNF5_REPOS,
        signed=True,
    ),
}
DEFAULT = RELEASES[43]


def release(version: int | None) -> Release:
    """The release `python -m lab up --fedora VERSION` presents (the default without one)."""
    if version is None:
        return DEFAULT
    if version not in RELEASES:
        known = ", ".join(str(v) for v in RELEASES)
        raise LabError(f"--fedora {version}: the lab presents Fedora {known}")
    return RELEASES[version]
