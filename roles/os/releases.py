"""The Fedora releases halo-cluster supports, and what differs between them: one typed table
(`RELEASES`), the only place a release's difference is declared. The node's /etc/os-release (in
its one read, the snapshot) names its release (`VERSION_ID`) and its end of support
(`SUPPORT_END`); the os role's preflight judges both here: an unknown release is refused with the
supported list, one past its end of support is a warning naming the date and the way forward,
and every node of a cluster runs one release. Pure decisions: plain values in, checks out.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from halo_cluster.config.docs import page
from halo_cluster.decide.preflight import FAIL, OK, WARN, Check

# the way forward when a release leaves support; `halo-cluster upgrade --os --release` is planned
# (issue 43 item 4), so the line names the release and the page, not a command that is not there
RELEASE_DOCS = page("roles/os.md")


@dataclass(frozen=True)
class Release:
    """One Fedora release as the tool expects to find it on a node."""

    version: str  # os-release's VERSION_ID
    support_end: str  # the end of support, YYYY-MM-DD, when the node's os-release has none
    kernel: str  # the kernel stream it ships
    podman: str  # the podman it ships (5.8, or 6 with its removals: docs/roles/os.md)
    repos: str  # where the distribution's .repo files are
    signatures_enforced: bool  # rpm refuses an unsigned package by default
    sources: str

    def expects(self) -> str:
        """What the tool expects on a node of this release, in a few words."""
        signed = "enforced" if self.signatures_enforced else "not enforced"
        return f"dnf5, repos in {self.repos}, podman {self.podman}, RPM signatures {signed}"


# dnf is dnf5 on every one of them: Fedora > 40 (dnf5.spec: dnf5 obsoletes dnf, versions-notes.md)
RELEASES: tuple[Release, ...] = (
    Release(
        "43",
        "2026-12-02",
        "6.17 at GA, then 6.18.x and 7.1.x",
        "5.8",
        "/etc/yum.repos.d",
        False,
        "its os-release SUPPORT_END=2026-12-02 (CISOfy/lynis#1686; the schedule says 2026-12-09, "
        "parallaxsecond/rust-tss-esapi#632); podman 5.8 (podman#29456); kernels "
        "(Barre/ZeroFS#584, kyuz0/amd-strix-halo-vllm-toolboxes' USB4_RDMA_PLAN.md)",
    ),
    Release(
        "44",
        "2027-05-19",
        "6.19 at GA (2026-04-28), then 7.0.x",
        "5.8",
        "/etc/yum.repos.d",
        False,
        "its os-release SUPPORT_END=2027-05-19 (recorded, tests/plan/fixtures/SOURCES.md); "
        "kernel 7.0.x (coreos/fedora-coreos-config#4177); podman 5.8 (podman#29456)",
    ),
    Release(
        "45",
        "2027-12-08",
        "7.x (7.2.x)",
        "6",
        "/usr/share/dnf5/repos.d",
        True,
        "end of support 2027-12-08 (fedora-release-45-14 changelog, 2026-10-23); repo files in "
        "/usr/share/dnf5/repos.d, /etc/yum.repos.d an override, no dnf 4 "
        "(coreos/fedora-coreos-tracker#2172, rpm-software-management/dnf5#2758); RPM signatures "
        "enforced (the-machine-herald/machineherald.io#2404); podman 6 (Fedora Changes/Podman6, "
        "coreos/fedora-coreos-tracker#2220); kernel 7.2.x (morrownr/88x2bu-20210702#280)",
    ),
)
SUPPORTED = tuple(r.version for r in RELEASES)
NEWEST = RELEASES[-1]


def release(version: str | None) -> Release | None:
    return next((r for r in RELEASES if r.version == version), None)


def named(os_release: dict[str, str]) -> str:
    """`Fedora 44` as the node's os-release names it (`?` without a VERSION_ID)."""
    return f"Fedora {os_release.get('VERSION_ID') or '?'}"


def supported_list() -> str:
    return ", ".join(SUPPORTED[:-1]) + f" or {SUPPORTED[-1]}"


def support_end(os_release: dict[str, str], known: Release) -> tuple[str, str]:
    """The node's end of support and where it comes from: its os-release's SUPPORT_END (the
    release's own fedora-release package writes it), else the table's."""
    found = os_release.get("SUPPORT_END", "")
    try:
        datetime.date.fromisoformat(found)
        return found, "SUPPORT_END in /etc/os-release"
    except ValueError:
        return known.support_end, "the release's schedule"


def way_forward(known: Release) -> str:
    if known is NEWEST:
        return f"upgrade to the next Fedora release once it is supported ({RELEASE_DOCS})"
    return f"upgrade to Fedora {NEWEST.version} ({RELEASE_DOCS})"


def check(os_release: dict[str, str], today: datetime.date) -> Check:
    """The node's release: FAIL (refuses) for a release outside the table, with the supported
    list; WARN once past its end of support, naming the date and the way forward; else OK with
    what the tool expects there."""
    known = release(os_release.get("VERSION_ID"))
    if known is None:
        return Check(
            "release",
            FAIL,
            f"{named(os_release)} is not a supported release (Fedora {supported_list()}): "
            f"install or upgrade to Fedora {NEWEST.version} ({RELEASE_DOCS})",
            refuses=True,
        )
    end, where = support_end(os_release, known)
    if datetime.date.fromisoformat(end) < today:
        return Check(
            "release",
            WARN,
            f"Fedora {known.version} reached its end of support on {end} ({where}): no more "
            f"updates, security ones included; {way_forward(known)}",
        )
    return Check("release", OK, f"Fedora {known.version}, supported until {end}: {known.expects()}")


def same_release(mine: str | None, others: dict[str, str | None]) -> Check:
    """Every node of one cluster on one release: its kernel stream, its dnf repos and its podman
    are the same code path everywhere. `others` is {node: VERSION_ID} of the other nodes read."""
    differ = {name: version for name, version in others.items() if version != mine}
    if differ:
        theirs = ", ".join(f"{name} runs Fedora {v or '?'}" for name, v in sorted(differ.items()))
        return Check(
            "same release",
            FAIL,
            f"Fedora {mine or '?'} here, but {theirs}: every node of a cluster runs one release "
            f"(one kernel stream, podman and dnf repos): upgrade them to one ({RELEASE_DOCS})",
            refuses=True,
        )
    return Check("same release", OK, f"Fedora {mine or '?'} on every node read")


def markdown_table() -> str:
    """The releases as a docs table (docs/roles/os.md)."""
    rows = [
        "| release | supported until | kernel | podman | repo files | RPM signatures | sources |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in RELEASES:
        signed = "enforced" if r.signatures_enforced else "not enforced"
        rows.append(
            f"| {r.version} | {r.support_end} | {r.kernel} | {r.podman} | `{r.repos}` | {signed} "
            f"| {r.sources} |"
        )
    return "\n".join(rows)
