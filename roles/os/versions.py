"""rpm's version order, the known-versions list's entries and their verdicts, and the version
locks dnf keeps: pure decisions, plain values in, verdicts out.

`rpmvercmp` is rpm's own comparison (rpmio/rpmvercmp.c), tested on rpm's own cases
(tests/unit/fixtures/rpmvercmp.at); `compare_evr` adds the epoch and the release as rpm does.
"""

from __future__ import annotations

import operator
import re
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from halo_cluster.config import rpmversion
from halo_cluster.config.quoting import quote

KNOWN_VERSIONS = Path(__file__).resolve().parent / "known-versions.yml"
GOOD, BAD, UNKNOWN = "good", "bad", "unknown"
PACKAGES = ("kernel-core", "amd-gpu-firmware")  # what an entry may name
OPERATORS: dict[str, Callable[[int, int], bool]] = {
    "=": operator.eq,  # `= 7.1.6`: that version at any release (every Fedora's build of it)
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_ALNUM = re.compile(r"[A-Za-z0-9]")


def rpmvercmp(a: str, b: str) -> int:
    """-1, 0 or 1 as rpm orders two version (or release) strings: alphanumeric segments compared
    one by one, numbers as numbers and above letters, `~` before everything, `^` after the end."""
    if a == b:
        return 0
    one, two = a, b
    while one or two:
        one = _skip_separators(one)
        two = _skip_separators(two)
        if one.startswith("~") or two.startswith("~"):
            if not one.startswith("~"):
                return 1
            if not two.startswith("~"):
                return -1
            one, two = one[1:], two[1:]
            continue
        if one.startswith("^") or two.startswith("^"):
            if not one:
                return -1
            if not two:
                return 1
            if not one.startswith("^"):
                return 1
            if not two.startswith("^"):
                return -1
            one, two = one[1:], two[1:]
            continue
        if not (one and two):
            break
        pattern = r"[0-9]*" if one[0] in "0123456789" else r"[A-Za-z]*"
        seg1 = re.match(pattern, one).group()  # type: ignore[union-attr]
        seg2 = re.match(pattern, two).group()  # type: ignore[union-attr]
        one, two = one[len(seg1) :], two[len(seg2) :]
        if not seg2:  # a number is newer than letters
            return 1 if pattern == r"[0-9]*" else -1
        if pattern == r"[0-9]*":
            seg1, seg2 = seg1.lstrip("0"), seg2.lstrip("0")
            if len(seg1) != len(seg2):
                return 1 if len(seg1) > len(seg2) else -1
        if seg1 != seg2:
            return 1 if seg1 > seg2 else -1
    if not one and not two:
        return 0
    return -1 if not one else 1


def _skip_separators(text: str) -> str:
    i = 0
    while i < len(text) and not _ALNUM.match(text[i]) and text[i] not in "~^":
        i += 1
    return text[i:]


def compare_evr(a: str, b: str) -> int:
    """rpm's order of two EVRs; where one has no release, as a bound such as `< 6.18.4`, the
    versions alone decide (rpm compares a dependency without a release so). Each is parsed by
    rpm's ASCII grammar (`rpmversion.split`): anything else is a ValueError, never a guess."""
    ea, va, ra = rpmversion.split(a)
    eb, vb, rb = rpmversion.split(b)
    if ea != eb:
        return 1 if ea > eb else -1
    if ra is None or rb is None:
        return rpmvercmp(va, vb)
    return rpmvercmp(va, vb) or rpmvercmp(ra, rb)


def version_problem(spec: object) -> str | None:
    """Why `spec` is not a version of the list: an EVR as rpm prints it without the arch
    (`6.18.9-200.fc43`), or `OP VERSION[-RELEASE]` with OP one of = < <= > >=, by rpm's ASCII
    grammar (`rpmversion`)."""
    if not isinstance(spec, str) or " " not in spec:
        return rpmversion.problem(spec)
    op, _, bound = spec.partition(" ")
    if op not in OPERATORS:
        return f"{quote(spec)}: {quote(op)} is not one of = < <= > >= (< 6.18.4)"
    found = rpmversion.problem(bound, example="6.18.4", release=False)
    return f"{quote(spec)}: {found}" if found else None


def matches(spec: str, evr: str) -> bool:
    op, _, bound = spec.partition(" ") if " " in spec else ("", "", spec)
    if not op:
        return compare_evr(evr, bound) == 0
    return OPERATORS[op](compare_evr(evr, bound), 0)


@dataclass(frozen=True)
class Entry:
    """One entry of the known-versions list (or of `os.known_versions`)."""

    package: str
    versions: tuple[str, ...]
    verdict: str  # good or bad
    symptom: str
    source: str
    date: str
    mine: bool = False  # from cluster.yml, not the repository's list
    releases: tuple[str, ...] = ()  # the Fedora releases (VERSION_ID) it is about; () every one

    def covers(self, package: str, evr: str) -> bool:
        return package == self.package and any(matches(s, evr) for s in self.versions)

    def about(self, release: str | None) -> bool:
        return not self.releases or release in self.releases


def entry(item: dict[str, Any], mine: bool = False) -> Entry:
    return Entry(
        package=item["package"],
        versions=tuple(item["versions"]),
        verdict=item["verdict"],
        symptom=item.get("symptom") or "",
        source=item["source"],
        date=str(item["date"]),
        mine=mine,
        releases=tuple(str(r) for r in item.get("releases") or ()),
    )


def repository_list() -> tuple[Entry, ...]:
    """The repository's list (roles/os/known-versions.yml, package data)."""
    return tuple(entry(item) for item in yaml.safe_load(KNOWN_VERSIONS.read_text()))


def for_release(entries: Iterable[Entry], release: str | None) -> tuple[Entry, ...]:
    """The entries a node of this Fedora release is judged by: a kernel or firmware of one
    release is no fix for a node of another."""
    return tuple(e for e in entries if e.about(release))


def judge(entries: Iterable[Entry], package: str, evr: str) -> Entry | None:
    """The entry that decides this version: the first that covers it (the user's come first).
    A version outside rpm's grammar (no rpm prints one) is judged by none."""
    if rpmversion.problem(evr) is not None:
        return None
    return next((e for e in entries if e.covers(package, evr)), None)


def newest_good(entries: Iterable[Entry], package: str) -> str | None:
    """The newest exact version a good entry names, that no entry before it calls bad."""
    entries = tuple(entries)
    good = [
        spec
        for e in entries
        if e.package == package and e.verdict == GOOD
        for spec in e.versions
        if " " not in spec
    ]
    good = [v for v in good if (j := judge(entries, package, v)) and j.verdict == GOOD]
    best = None
    for version in good:
        if best is None or compare_evr(version, best) > 0:
            best = version
    return best


# dnf's version locks, as its two generations keep them
DNF5_LOCKS = "/etc/dnf/versionlock.toml"  # dnf5 (libdnf5 VERSIONLOCK_CONF_FILENAME)
DNF4_LOCKS = "/etc/dnf/plugins/versionlock.list"  # dnf 4's versionlock plugin (the lab)
_DNF4_LINE = re.compile(
    r"(?P<name>.+)-(?:(?P<epoch>[0-9]+):)?(?P<version>[^-:]+)-(?P<release>[^-]+)\.\*"
)


def dnf5_locks(text: str | None) -> dict[str, set[str]]:
    """{name: EVRs locked to exactly that EVR} from dnf5's versionlock.toml; an entry with
    other conditions (a range, an exclude, an arch) locks no one EVR and is left out."""
    if not text:
        return {}
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}
    locks: dict[str, set[str]] = {}
    for package in document.get("packages", []):
        conditions = package.get("conditions", [])
        if (
            len(conditions) == 1
            and conditions[0].get("key") == "evr"
            and (conditions[0].get("comparator") == "=")
        ):
            locks.setdefault(package.get("name", ""), set()).add(_plain(conditions[0]["value"]))
    return locks


def dnf4_locks(text: str | None) -> dict[str, set[str]]:
    """{name: EVRs} from dnf 4's versionlock.list (`NAME-[EPOCH:]VERSION-RELEASE.*`; a line
    starting with `!` excludes a version, and is left out)."""
    locks: dict[str, set[str]] = {}
    for line in (text or "").splitlines():
        found = _DNF4_LINE.fullmatch(line.strip())
        if found and not line.startswith("!"):
            evr = f"{found['epoch']}:" if found["epoch"] else ""
            evr += f"{found['version']}-{found['release']}"
            locks.setdefault(found["name"], set()).add(_plain(evr))
    return locks


def _plain(evr: str) -> str:
    """An EVR as rpm's %{EVR} prints it: epoch 0 left out (dnf writes `0:` in some files)."""
    return evr.removeprefix("0:")


def missing_locks(wanted: dict[str, str], locks: dict[str, set[str]]) -> dict[str, str]:
    """The {name: EVR} of `wanted` the lock file does not hold."""
    return {name: evr for name, evr in wanted.items() if evr not in locks.get(name, set())}


def markdown_table() -> str:
    """The repository's list as a docs table (docs/roles/os.md), in its order."""
    rows = [
        "| package | versions | releases | verdict | symptom | source |",
        "|---|---|---|---|---|---|",
    ]
    for e in repository_list():
        shown = ", ".join(f"`{v}`" for v in e.versions)
        rows.append(
            f"| {e.package} | {shown} | {', '.join(e.releases) or 'every one'} | {e.verdict} "
            f"| {e.symptom or '-'} | {e.source} |"
        )
    return "\n".join(rows)
