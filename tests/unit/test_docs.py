"""The docs describe what exists: every role's page and variables, every make target, every
`halo-cluster` command; the pages the wheel ships name no make target (a wheel has none)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from halo_cluster import roles
from halo_cluster.tools.commands import NAMES as COMMANDS
from tests.unit.helpers_package import shipped_pages

ROOT = Path(__file__).resolve().parents[2]
ROLES = roles.all_roles()


@pytest.mark.parametrize("role", ROLES, ids=[roles.name(r) for r in ROLES])
def test_every_role_variable_is_documented_with_the_schema_default(role) -> None:
    doc = (ROOT / "docs" / "roles" / f"{roles.name(role)}.md").read_text()
    rows = re.findall(r"^\| `(halo_\w+)` \| ([^|]+) \|", doc, re.MULTILINE)
    assert {name for name, _ in rows} == set(role.schema.VARIABLES)
    for name, default in rows:
        assert default.strip() == roles.schema().variable_default_text(name), (
            f"{name}: docs say {default}"
        )


def test_roles_declare_what_the_registry_needs() -> None:
    for role in ROLES:
        assert isinstance(role.ORDER, int) and callable(role.paths) and callable(role.apply)
        assert isinstance(role.PACKAGES, tuple) and isinstance(role.schema.VARIABLES, tuple)
    names = [roles.name(r) for r in ROLES]
    assert names[0] == "packages"
    assert names.index("reboot") > names.index("kernel")


def test_readme_make_targets_exist() -> None:
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z-]+):", makefile, re.MULTILINE))
    readme = (ROOT / "README.md").read_text()
    for target in re.findall(r"`make ([a-z-]+)", readme):
        assert target in targets, target


def test_documented_halo_cluster_commands_exist() -> None:
    found = set()
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = path.read_text()
        found |= set(re.findall(r"halo-cluster (?:\[--config PATH\] )?([a-z]+)\b", text))
    assert found and found <= set(COMMANDS), found - set(COMMANDS)


def test_ci_md_says_every_commands_exit_codes_as_the_code_declares_them() -> None:
    """docs/ci.md's table of entry points: one row per command of the exit-code table
    (halo_cluster/tools/commands/exits.py), its exit cell the table's codes and meanings."""
    from halo_cluster.tools.commands.exits import EXITS

    text = (ROOT / "docs" / "ci.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z -]+)` \| .* \| ([^|]+) \|$", text, re.MULTILINE))
    assert set(rows) == set(EXITS)
    for command, codes in EXITS.items():
        assert rows[command] == "; ".join(f"{code} {meaning}" for code, meaning in codes), command


def test_ci_md_lists_every_json_field_as_the_code_declares_them() -> None:
    """docs/ci.md's table of the --json documents is documents.py's, row for row, with its
    version field (issue 45 item 10)."""
    from halo_cluster.tools.commands import documents

    text = (ROOT / "docs" / "ci.md").read_text()
    section = text.partition("\n## The --json documents\n")[2].partition("\n## ")[0]
    table = "\n".join(line for line in section.splitlines() if line.startswith("|"))
    assert table == documents.table()
    assert "| every | `version` | int |" in table


def test_no_shipped_page_names_a_make_target_or_links_a_page_left_out() -> None:
    """A wheel user has no Makefile: a page the wheel ships (setup.py's choice) names the
    console script, never one of the Makefile's targets, and links no page the wheel leaves
    out (the checkout's own: the lab, the tests, the code's map)."""
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][\w-]*):", makefile, re.MULTILINE))
    targets |= set(re.search(r"^\.PHONY: (.*)$", makefile, re.MULTILINE)[1].split())
    shipped = shipped_pages()
    assert "roles/serve.md" in shipped and "lab.md" not in shipped
    named, linked = {}, {}
    for page in shipped:
        text = (ROOT / "docs" / page).read_text()
        if found := [t for t in re.findall(r"\bmake ([a-z][\w-]*)", text) if t in targets]:
            named[page] = found
        folder = (ROOT / "docs" / page).parent
        links = re.findall(r"\]\(([^)#:]+\.md)(?:#[^)]*)?\)", text)
        gone = [link for link in links if _page_of(folder / link) not in shipped]
        if gone:
            linked[page] = gone
    assert (named, linked) == ({}, {})


def _page_of(path: Path) -> str:
    """A linked file as a page name of docs/ (`roles/serve.md`; `../README.md` for one above)."""
    return Path(os.path.relpath(path.resolve(), ROOT / "docs")).as_posix()
