"""The os role's decisions: rpm's version order on rpm's own test cases, the known-versions list
and its entries, dnf's lock files as recorded, and `os.known_versions` in cluster.yml."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from halo_cluster.config.loader import ConfigError, load_cluster
from halo_cluster.roles.os import versions
from tests.recorded import fixture
from tests.unit.configs import VALID_ROCE, write

RPM_CASES = Path(__file__).resolve().parent / "fixtures" / "rpmvercmp.at"


def rpm_cases() -> list[tuple[str, str, int]]:
    """rpm's tests/rpmvercmp.at: each `RPMVERCMP(a, b, expected)` it runs (not the `dnl` ones)."""
    found = re.findall(r"^RPMVERCMP\((.*), (.*), (-?\d)\)$", RPM_CASES.read_text(), re.MULTILINE)
    return [(a, b, int(expected)) for a, b, expected in found]


def test_rpms_own_cases_are_all_read() -> None:
    assert len(rpm_cases()) == 69  # every RPMVERCMP line of the file


@pytest.mark.parametrize(("a", "b", "expected"), rpm_cases())
def test_rpmvercmp_orders_as_rpm_does(a: str, b: str, expected: int) -> None:
    assert versions.rpmvercmp(a, b) == expected


# rpm's later rpmvercmp.at adds the caret (as copied in insights-core's test_rpm_vercmp.py)
@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("1.0^", "1.0", 1),
        ("1.0", "1.0^git1", -1),
        ("1.0^git1", "1.0^git2", -1),
        ("1.0^git1", "1.01", -1),
        ("1.0^20160101", "1.0.1", -1),
        ("1.0~rc1^git1", "1.0~rc1", 1),
        ("1.0^git1~pre", "1.0^git1", -1),
    ],
)
def test_the_caret_sorts_after_the_version_it_extends(a: str, b: str, expected: int) -> None:
    assert versions.rpmvercmp(a, b) == expected


def test_evrs_compare_by_epoch_then_version_then_release() -> None:
    assert versions.compare_evr("6.18.10-200.fc43", "6.18.9-200.fc43") == 1
    assert versions.compare_evr("6.18.9-200.fc43", "6.18.9-201.fc43") == -1
    assert versions.compare_evr("1:1.0-1", "2.0-1") == 1
    assert versions.compare_evr("0:1.19.5-5.fc29", "1.19.5-5.fc29") == 0
    # a bound without a release compares the version alone
    assert versions.matches("< 6.18.4", "6.17.8-300.fc43")
    assert not versions.matches("< 6.18.4", "6.18.4-200.fc43")
    assert versions.matches(">= 20260110-1.fc43", "20260916-1.fc43")


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("6.18.9-200.fc43", None),
        ("< 6.18.4", None),
        ("<= 20251125-1.fc43", None),
        ("6.18.9", "is not [EPOCH:]VERSION-RELEASE"),
        ("6.18.9-200.fc43.x86_64 x", "is not one of"),
        ("== 6.18.9-200.fc43", "'==' is not one of = < <= > >="),
    ],
)
def test_a_version_is_an_evr_or_a_bound(spec: str, problem: str | None) -> None:
    found = versions.version_problem(spec)
    assert (found is None) if problem is None else (problem in (found or ""))


def test_the_repository_list_is_valid_and_sourced() -> None:
    entries = versions.repository_list()
    assert {e.package for e in entries} == set(versions.PACKAGES)
    for e in entries:
        assert e.source and re.fullmatch(r"\d{4}-\d{2}-\d{2}", e.date), e
        assert all(versions.version_problem(v) is None for v in e.versions), e
        assert e.verdict in (versions.GOOD, versions.BAD)
        assert e.symptom or e.verdict == versions.GOOD, e


def test_the_lists_verdicts() -> None:
    entries = versions.repository_list()
    verdict = {
        (p, v): (versions.judge(entries, p, v) or versions.Entry("", (), "unknown", "", "", ""))
        for p, v in [
            ("amd-gpu-firmware", "20251125-1.fc43"),
            ("amd-gpu-firmware", "20260110-1.fc43"),
            ("amd-gpu-firmware", "20260916-1.fc43"),
            ("kernel-core", "6.17.8-300.fc43"),
            ("kernel-core", "6.18.6-200.fc43"),
            ("kernel-core", "6.18.16-200.fc43"),
        ]
    }
    assert {key: e.verdict for key, e in verdict.items()} == {
        ("amd-gpu-firmware", "20251125-1.fc43"): "bad",
        ("amd-gpu-firmware", "20260110-1.fc43"): "good",
        ("amd-gpu-firmware", "20260916-1.fc43"): "unknown",
        ("kernel-core", "6.17.8-300.fc43"): "bad",
        ("kernel-core", "6.18.6-200.fc43"): "good",
        ("kernel-core", "6.18.16-200.fc43"): "unknown",
    }
    assert versions.newest_good(entries, "kernel-core") == "6.18.9-200.fc43"
    assert versions.newest_good(entries, "amd-gpu-firmware") == "20260110-1.fc43"


def test_an_entry_of_yours_decides_before_the_repositorys() -> None:
    mine = versions.entry(
        {
            "package": "amd-gpu-firmware",
            "versions": ["20260110-1.fc43"],
            "verdict": "bad",
            "symptom": "hangs here",
            "source": "our lab",
            "date": "2026-11-30",
        },
        mine=True,
    )
    entries = (mine, *versions.repository_list())
    assert versions.judge(entries, "amd-gpu-firmware", "20260110-1.fc43") is mine
    assert versions.newest_good(entries, "amd-gpu-firmware") == "20251111-1.fc43"


def test_dnf5_locks_from_its_recorded_files() -> None:
    """ci-dnf-stack's versionlock.toml files (tests/plan/fixtures/SOURCES.md): an exact `evr =`
    is a lock of that EVR (epoch 0 as rpm prints it, without `0:`); a range locks no one EVR."""
    two = fixture("dnf5-versionlock-ci-dnf-stack.toml")
    assert versions.dnf5_locks(two) == {"PackageB": {"1.0-1"}, "PackageB-Obsoleter": {"1.0-1"}}
    epoch = fixture("dnf5-versionlock-epoch-ci-dnf-stack.toml")
    assert versions.dnf5_locks(epoch) == {"wget": {"1.19.5-5.fc29"}}
    assert versions.dnf5_locks(fixture("dnf5-versionlock-interval-ci-dnf-stack.toml")) == {}
    assert versions.dnf5_locks(None) == {} and versions.dnf5_locks("version = ") == {}


def test_dnf4_locks_from_its_recorded_list() -> None:
    """dnf 4's `versionlock list` as ci-dnf-stack records it: a lock, and an exclude (`!`)."""
    assert versions.dnf4_locks(fixture("dnf4-versionlock-list-ci-dnf-stack.txt")) == {
        "wget": {"1.19.5-5.fc29"}
    }


def test_missing_locks_are_the_wanted_ones_the_file_lacks() -> None:
    wanted = {"kernel-core": "6.18.6-200.fc43", "amd-gpu-firmware": "20260110-1.fc43"}
    locks = {"kernel-core": {"6.18.5-200.fc43", "6.18.6-200.fc43"}}
    assert versions.missing_locks(wanted, locks) == {"amd-gpu-firmware": "20260110-1.fc43"}


MINE = """os:
  lock: true
  known_versions:
    - package: amd-gpu-firmware
      versions: ["20251125-1.fc43"]
      verdict: good
      source: our own soak test
      date: "2026-11-30"
"""


def test_your_entries_come_first_and_a_reversed_verdict_warns(tmp_path: Path) -> None:
    cluster = load_cluster(write(tmp_path, VALID_ROCE + MINE))
    first = cluster.os.known_versions[0]
    assert first["mine"] and first["verdict"] == "good" and first["symptom"] == ""
    assert len(cluster.os.known_versions) == 1 + len(versions.repository_list())
    assert cluster.os_lock is True
    assert any(
        "os.known_versions[0]: warning: calls 20251125-1.fc43 good, the repository's list bad" in w
        for w in cluster.warnings
    ), cluster.warnings


@pytest.mark.parametrize(
    ("entry", "line"),
    [
        ("verdict: fine", "os.known_versions[0].verdict: 'fine' is not one of: good, bad"),
        ("package: linux-firmware", "os.known_versions[0].package: 'linux-firmware' is not one"),
        ('versions: ["6.18.9"]', "os.known_versions[0].versions[0]: '6.18.9' is not [EPOCH"),
        ("date: 2026-11-30", "os.known_versions[0].date: expected string, got date"),
        ('date: "30.11.2026"', "os.known_versions[0].date: '30.11.2026' is not a date"),
        ("colour: red", "os.known_versions[0].colour: unknown key"),
        ("verdict: bad", "os.known_versions[0].symptom: a bad entry needs its symptom"),
    ],
)
def test_a_wrong_entry_is_one_line_naming_its_key(tmp_path: Path, entry: str, line: str) -> None:
    fields = {
        "package": "amd-gpu-firmware",
        "versions": '["20251125-1.fc43"]',
        "verdict": "good",
        "source": "ours",
        "date": '"2026-11-30"',
    }
    key = entry.split(":")[0]
    fields[key] = entry.split(": ", 1)[1]
    items = "\n".join(f"      {k}: {v}" for k, v in fields.items()).replace("      ", "    - ", 1)
    text = VALID_ROCE + f"os:\n  known_versions:\n{items}\n"
    with pytest.raises(ConfigError) as raised:
        load_cluster(write(tmp_path, text))
    assert any(line in problem for problem in raised.value.problems), raised.value.problems
    assert all("\n" not in problem for problem in raised.value.problems)


def test_a_missing_source_is_named(tmp_path: Path) -> None:
    text = VALID_ROCE + (
        "os:\n  known_versions:\n    - package: kernel-core\n      versions: ['< 6.18.4']\n"
        "      verdict: bad\n      symptom: crashes\n      date: '2026-11-30'\n"
    )
    with pytest.raises(ConfigError) as raised:
        load_cluster(write(tmp_path, text))
    assert any(
        "os.known_versions[0].source: required key is missing" in p for p in raised.value.problems
    ), raised.value.problems
