"""The releases table (roles/os/releases.py) on recorded os-release files: a supported release
is OK until its end of support (the node's own SUPPORT_END), a warning naming the date and the
way forward after it, an unknown release a refusal with the supported list, and a cluster of
two releases refused on every node."""

from __future__ import annotations

import datetime
from types import SimpleNamespace

import pytest

from halo_cluster.config.docs import page
from halo_cluster.decide.preflight import FAIL, OK, WARN
from halo_cluster.node.facts import OsRelease, TextFiles
from halo_cluster.roles.os import releases, versions
from tests.infra.target import FILES, Target
from tests.recorded import fixture, text_files_output
from tests.unit.helpers_native import NATIVE

F43 = OsRelease().process(fixture("os-release-fedora43-workstation.txt").splitlines())
F44 = OsRelease().process(fixture("os-release-fedora44-workstation.txt").splitlines())
PAGE = page("roles/os.md")
DAY = datetime.date.fromisoformat


def test_the_recorded_releases_name_their_end_of_support() -> None:
    assert (F43["VERSION_ID"], F43["SUPPORT_END"]) == ("43", "2026-12-02")
    assert (F44["VERSION_ID"], F44["SUPPORT_END"]) == ("44", "2027-05-19")


def test_a_supported_release_is_ok_until_its_end_of_support_with_what_it_gives() -> None:
    found = releases.check(F44, DAY("2027-05-19"))
    assert found.status == OK and not found.refuses
    assert found.detail == (
        "Fedora 44, supported until 2027-05-19: dnf5, repos in /etc/yum.repos.d, podman 5.8, "
        "RPM signatures not enforced"
    )


def test_past_its_support_end_a_release_is_a_warning_with_the_date_and_the_way_forward() -> None:
    found = releases.check(F43, DAY("2026-12-03"))
    assert found.status == WARN and not found.refuses
    ended = "Fedora 43 reached its end of support on 2026-12-02 (SUPPORT_END in /etc/os-release)"
    assert ended in found.detail
    assert found.detail.endswith(f"upgrade to Fedora 45 ({PAGE})")
    assert releases.check(F43, DAY("2026-12-02")).status == OK  # its last day is still supported


def test_the_nodes_own_support_end_decides_else_the_tables() -> None:
    extended = dict(F43, SUPPORT_END="2027-01-31")  # a fedora-release update moves the date
    assert releases.check(extended, DAY("2026-12-20")).status == OK
    bare = {k: v for k, v in F43.items() if k != "SUPPORT_END"}
    found = releases.check(bare, DAY("2026-12-03"))
    assert found.status == WARN and "on 2026-12-02 (the release's schedule)" in found.detail
    garbled = dict(F43, SUPPORT_END="soon")
    assert "(the release's schedule)" in releases.check(garbled, DAY("2026-12-03")).detail


def test_the_newest_release_past_its_end_points_to_the_next_one() -> None:
    f45 = dict(F44, VERSION_ID="45", SUPPORT_END="2027-12-08")
    found = releases.check(f45, DAY("2027-12-09"))
    assert found.status == WARN
    assert "upgrade to the next Fedora release once it is supported" in found.detail


@pytest.mark.parametrize("version", ["42", "46", "rawhide", None])
def test_an_unknown_release_is_refused_with_the_supported_list(version: str | None) -> None:
    os_release = dict(F44, VERSION_ID=version) if version else {"ID": "fedora"}
    found = releases.check(os_release, DAY("2026-12-04"))
    assert found.status == FAIL and found.refuses
    assert found.detail == (
        f"Fedora {version or '?'} is not a supported release (Fedora 43, 44 or 45): "
        f"install or upgrade to Fedora 45 ({PAGE})"
    )


def test_a_mixed_cluster_is_refused_in_one_line_naming_each_other_node() -> None:
    found = releases.same_release("44", {"halo3": "45", "halo2": "44", "halo4": "43"})
    assert found.status == FAIL and found.refuses
    assert found.detail.startswith(
        "Fedora 44 here, but halo3 runs Fedora 45, halo4 runs Fedora 43: "
    )
    assert "\n" not in found.detail
    assert releases.same_release("44", {"halo2": "44"}).status == OK
    assert releases.same_release("44", {}).status == OK  # a cluster of one


def test_each_difference_between_releases_is_the_tables() -> None:
    """dnf5's repo folder moves in 45, podman 6 and signature enforcement come with it
    (docs/roles/os.md names the sources)."""
    table = {r.version: r for r in releases.RELEASES}
    assert releases.SUPPORTED == ("43", "44", "45")
    assert [table[v].repos for v in releases.SUPPORTED] == [
        "/etc/yum.repos.d",
        "/etc/yum.repos.d",
        "/usr/share/dnf5/repos.d",
    ]
    assert [table[v].podman for v in releases.SUPPORTED] == ["5.8", "5.8", "6"]
    assert [table[v].signatures_enforced for v in releases.SUPPORTED] == [False, False, True]
    for release in releases.RELEASES:  # a real day, each later than the one before
        assert DAY(release.support_end)
    ends = [DAY(r.support_end) for r in releases.RELEASES]
    assert ends == sorted(ends)
    assert table["43"].support_end == F43["SUPPORT_END"]
    assert table["44"].support_end == F44["SUPPORT_END"]


def test_a_node_is_judged_by_its_own_releases_entries() -> None:
    """The repository's good fc43 kernels are no fix for a Fedora 45 node; the known-bad ones
    (before 6.18.4, 7.1.6; firmware 20251125 and 20260519) hold on every release."""
    entries = versions.repository_list()
    on45 = versions.for_release(entries, "45")
    assert versions.newest_good(versions.for_release(entries, "43"), "kernel-core") == (
        "6.18.9-200.fc43"
    )
    assert versions.newest_good(on45, "kernel-core") is None
    for package, evr in (
        ("kernel-core", "6.17.8-300.fc43"),
        ("kernel-core", "7.1.6-100.fc45"),
        ("kernel-core", "7.1.6-201.fc44"),
        ("amd-gpu-firmware", "20251125-1.fc43"),
        ("amd-gpu-firmware", "20260519-1.fc45"),
    ):
        release = evr.rpartition(".fc")[2]
        judged = versions.judge(versions.for_release(entries, release), package, evr)
        assert judged is not None and judged.verdict == versions.BAD, (package, evr)
    assert versions.judge(on45, "kernel-core", "7.1.8-200.fc45") is None  # not known: NOT VERIFIED
    assert versions.judge(on45, "amd-gpu-firmware", "20260110-1.fc43") is None


def test_an_equal_bound_is_that_version_at_any_release() -> None:
    assert versions.matches("= 7.1.6", "7.1.6-100.fc43")
    assert versions.matches("= 7.1.6", "7.1.6-200.fc45")
    assert not versions.matches("= 7.1.6", "7.1.8-200.fc45")
    assert not versions.matches("= 7.1.6", "7.1.60-200.fc45")
    assert versions.version_problem("= 7.1.6") is None


def test_the_docs_tables_name_every_release_and_entry() -> None:
    table = releases.markdown_table()
    for release in releases.RELEASES:
        assert f"| {release.version} | {release.support_end} |" in table
    known = versions.markdown_table()
    assert "| kernel-core | `= 7.1.6` | every one | bad |" in known
    assert "| amd-gpu-firmware | `20260110-1.fc43` | 43 | good |" in known


def test_verify_reads_each_nodes_release_in_its_one_read() -> None:
    """`halo-cluster verify` (tests/infra) reads /etc/os-release with the other files, in the
    node's one read, as the deploy's snapshot does."""
    head = Target(NATIVE, NATIVE.head, None)
    command = TextFiles().command(FILES)
    assert command in head.first_reads([])
    output = text_files_output({"/etc/os-release": fixture("os-release-fedora44-workstation.txt")})
    head._read[command] = SimpleNamespace(rc=0, stdout="\n".join(output) + "\n")
    assert head.release == "44"
