"""The os role's keys: version locks (`os.lock`) and your own known-versions entries
(`os.known_versions`), and the list they give with the repository's."""

from __future__ import annotations

import datetime
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from halo_cluster.config import rules
from halo_cluster.config.model import Cluster, Problems
from halo_cluster.config.quoting import quote
from halo_cluster.config.schema import REQUIRED, Field, variables
from halo_cluster.roles.os import releases, versions

ENTRY = "os.known_versions[]"
# a symptom or a source is one line of a refusal: longer detail belongs behind the source's link
MAX_TEXT = 300


def date_problem(value: object) -> str | None:
    """A real day, `YYYY-MM-DD` in ASCII digits (fromisoformat alone would take 20261130 and
    2026-W48-1 too)."""
    text = value if isinstance(value, str) else ""
    if re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", text, re.ASCII):
        try:
            datetime.date.fromisoformat(text)
            return None
        except ValueError:
            return f"{quote(value)} is no day of the calendar (a real date: 2026-11-30)"
    return f"{quote(value)} is not a date YYYY-MM-DD (quote it: YAML reads a bare date as a date)"


def release_problem(value: object) -> str | None:
    """A release the tool supports (quoted, `"45"`: YAML reads a bare 45 as a number, which the
    type check refuses)."""
    if value in releases.SUPPORTED:
        return None
    return f"{quote(value)} is not one of: {', '.join(releases.SUPPORTED)}"


# a symptom or a source: one printable line of a refusal
line_problem = rules.line(MAX_TEXT)


SECTION: tuple[Field, ...] = (
    Field("os", "mapping", {}, "Kernel and firmware versions (see the `os.*` keys)."),
    Field(
        "os.lock",
        "boolean",
        False,
        "Lock the kernel and firmware packages at the versions the node runs, once it passes "
        "the known-versions check (`dnf versionlock add`), so that a routine `dnf upgrade` "
        "cannot move them.",
    ),
    Field(
        "os.known_versions",
        "list of mappings",
        [],
        "Your own entries of the known-versions list, in its format (docs/kernel-upgrades.md); "
        "they come before the repository's, so an entry of yours decides the versions it covers.",
    ),
    Field(
        f"{ENTRY}.package",
        "string",
        REQUIRED,
        "`kernel-core` (the kernel) or `amd-gpu-firmware` (the amdgpu firmware).",
        versions.PACKAGES,
    ),
    Field(
        f"{ENTRY}.versions",
        "list of strings",
        REQUIRED,
        "At least one; each an EVR as rpm prints it without the arch (`6.18.9-200.fc43`), or "
        "`OP VERSION` with OP one of `=` `<` `<=` `>` `>=` (`< 6.18.4`, `= 7.1.6`: that version "
        "at any release): `[EPOCH:]VERSION-RELEASE`, ASCII letters, digits and `._+~^`, at most "
        "128 characters.",
        rule=versions.version_problem,
    ),
    Field(
        f"{ENTRY}.releases",
        "list of strings",
        [],
        "The Fedora releases (`VERSION_ID`) the entry is about, [] for every one: a node is "
        "judged by the entries of its own release only.",
        rule=release_problem,
    ),
    Field(f"{ENTRY}.verdict", "string", REQUIRED, "Good or bad.", (versions.GOOD, versions.BAD)),
    Field(
        f"{ENTRY}.symptom",
        "string",
        "",
        "What goes wrong (required for a bad entry: its refusal shows it); one printable "
        f"line, at most {MAX_TEXT} characters.",
        rule=line_problem,
    ),
    Field(
        f"{ENTRY}.source",
        "string",
        REQUIRED,
        f"Where it is reported (a link, an issue); one printable line, at most {MAX_TEXT} "
        "characters.",
        rule=line_problem,
    ),
    Field(
        f"{ENTRY}.date",
        "string",
        REQUIRED,
        'When the verdict was reached, a real date `"YYYY-MM-DD"` (quoted).',
        rule=date_problem,
    ),
)
# the page's generated tables beyond its keys (roles/docs.py writes them)
TABLES = {"releases": releases.markdown_table, "known versions": versions.markdown_table}
# host data it reads beyond its section: the other nodes' names (the versions each node runs are
# compared with theirs); and `halo_os_upgrade`, which its `derive` below gives
READS = ("halo_node", "halo_os_upgrade")
VARIABLES = variables(SECTION, READS)


@dataclass(frozen=True)
class Os:
    """The known-versions list the preflight judges by: your entries, then the repository's
    (host data `halo_os_known_versions`, each entry a mapping); and `halo_os_upgrade`, the
    targets of `halo-cluster upgrade --os` ({package: EVR}): none from cluster.yml, that
    upgrade's own deploy sets them (`--data`), so that its preflight admits the known-bad
    version each replaces."""

    known_versions: tuple[dict[str, Any], ...]
    upgrade: dict[str, str] = field(default_factory=dict)

    def judged(self, package: str, evr: str) -> versions.Entry | None:
        """The entry deciding this version (`upgrade --os` judges its targets by it)."""
        entries = (versions.entry(item, item["mine"]) for item in self.known_versions)
        return versions.judge(entries, package, evr)


def derive(cluster: Cluster, problems: Problems, base_dir: Path) -> Os:
    mine = [versions.entry(item, mine=True) for item in cluster.settings["os.known_versions"]]
    repository = versions.repository_list()
    for i, entry in enumerate(mine):
        if not entry.versions:
            problems.error(
                f"os.known_versions[{i}].versions",
                "[] lists no version (give at least one: 6.18.9-200.fc43, or a bound: < 6.18.4)",
            )
        if entry.verdict == versions.BAD and not entry.symptom:
            problems.error(f"os.known_versions[{i}].symptom", "a bad entry needs its symptom")
        reversed_ = _reverses(entry, repository)
        if reversed_:
            theirs = versions.GOOD if entry.verdict == versions.BAD else versions.BAD
            problems.warn(
                f"os.known_versions[{i}]",
                f"calls {reversed_} {entry.verdict}, the repository's list {theirs}: yours decides",
            )
    return Os(tuple(asdict(e) for e in (*mine, *repository)))


def _reverses(entry: versions.Entry, repository: tuple[versions.Entry, ...]) -> str | None:
    """A version the repository's list judges otherwise than this entry of yours, if any."""
    for theirs in repository:
        if theirs.package != entry.package or theirs.verdict == entry.verdict:
            continue
        exact = [v for v in (*entry.versions, *theirs.versions) if " " not in v]
        for version in exact:
            if entry.covers(entry.package, version) and theirs.covers(entry.package, version):
                return version
    return None
