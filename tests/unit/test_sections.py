"""Declared once: the schema is the cluster section and each role's section, the docs' keys tables
are generated from them (the cluster section's in configuration.md, each role's on its page), and
what a role may read (`schema.VARIABLES`) is its section's keys and the host data it names in
`READS`, each of which the inventory sets."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from halo_cluster import roles
from halo_cluster.config.hostdata import host_data
from halo_cluster.config.loader import load_cluster
from halo_cluster.config.schema import CORE, Field, Schema, host_name, variables
from halo_cluster.roles import docs
from tests.unit.configs import VALID_ROCE, write

ROOT = Path(__file__).resolve().parents[2]
ROLES = roles.all_roles()
SERVING = VALID_ROCE + "serve: {enabled: true, model: Qwen/Qwen3-14B}\n"


def test_the_schema_is_the_cluster_section_then_each_roles() -> None:
    sections = [role.schema.SECTION for role in ROLES]
    assert roles.schema().fields == CORE + tuple(f for s in sections for f in s)


def test_a_key_is_declared_in_one_section_only() -> None:
    mtu = roles.schema().by_path["mtu"]
    with pytest.raises(ValueError, match="mtu is declared twice"):
        Schema((*CORE, mtu, mtu))


def test_every_keys_table_is_the_generated_one() -> None:
    """configuration.md holds the cluster section's table, each role's page its own
    (`python -m halo_cluster.roles` writes them)."""
    assert docs.stale() == []
    pages = {page.name for page in docs.tables()}
    assert "configuration.md" in pages and "serve.md" in pages and "user.md" not in pages


def test_a_page_without_a_keys_table_gets_one_before_its_variables() -> None:
    table = docs.block("roles/motd/schema.py", (Field("motd", "mapping", {}, "The message."),))
    page = "# Role: motd\n\nWhat it does.\n\n| variable | default | meaning |\n|---|---|---|\n"
    once = docs.written(page, table)
    assert once.index("`motd`") < once.index("| variable |") and once.startswith("# Role: motd\n")
    assert docs.written(once, table) == once
    assert docs.written("# Role: motd\n", table) == "# Role: motd\n\n" + table


@pytest.mark.parametrize("role", ROLES, ids=[roles.name(r) for r in ROLES])
def test_a_role_may_read_its_section_and_what_it_names(role) -> None:
    section = role.schema.SECTION
    assert variables(section, role.schema.READS) == role.schema.VARIABLES
    own = {host_name(f.path) for f in section if f.type != "mapping" and "[]" not in f.path}
    assert own <= set(role.schema.VARIABLES)
    assert not own & set(role.schema.READS), "READS names only host data beyond its section"


@pytest.mark.parametrize("role", ROLES, ids=[roles.name(r) for r in ROLES])
def test_what_a_role_may_read_is_host_data(role, tmp_path: Path) -> None:
    cluster = load_cluster(write(tmp_path, SERVING))
    data = host_data(cluster, cluster.nodes[0])
    assert set(role.schema.VARIABLES) <= set(data), set(role.schema.VARIABLES) - set(data)


def _literal(default) -> str | None:
    """A default distinctive enough to find written out again: a number from 2 up, a long text."""
    if isinstance(default, bool) or default is None:
        return None
    if isinstance(default, float) or (isinstance(default, int) and default >= 2):
        return repr(default)
    return repr(default) if isinstance(default, str) and len(default) >= 8 else None


def test_no_default_is_written_again_in_the_model_or_the_host_data() -> None:
    """Defaults live in the schema only: the model, the host data and a role's typed model
    (roles/NAME/model.py) read them from there."""
    config = ROOT / "halo_cluster" / "config"
    model = [config / name for name in ("model.py", "derive.py", "datalink.py", "hostdata.py")]
    paths = [*model, *sorted(ROOT.glob("roles/*/model.py"))]
    sources = {str(path.relative_to(ROOT)): path.read_text() for path in paths}
    for field in roles.schema().fields:
        if (text := _literal(field.default)) is None:
            continue
        # not after "/": a CIDR's prefix length (224.0.0.0/4) is no default written again
        pattern = re.compile(rf"(?<![\w./]){re.escape(text)}(?![\w.])")
        for name, source in sources.items():
            assert not pattern.search(source), f"{field.path}'s default {text} in {name}"


CONFIG_LAYER = (
    "schema.py",
    "model.py",
    "derive.py",
    "datalink.py",
    "hostdata.py",
    "loader.py",
    "yamlread.py",
    "schemacheck.py",
    "filecheck.py",
    "presets.py",
    "expansion.py",
)


@pytest.mark.parametrize("module", CONFIG_LAYER)
def test_the_config_layer_names_no_role_key(module: str) -> None:
    """A role's keys, their defaults and what they derive live in its folder: the schema, the
    model, the host data and the loader know a role only through its section."""
    source = (ROOT / "halo_cluster" / "config" / module).read_text()
    keys = {f.path.split(".")[0] for section in roles.sections().values() for f in section}
    for key in sorted(keys):
        assert not re.search(rf"(?<![A-Za-z]){key}(?![A-Za-z])", source), f"{key} in {module}"


def test_the_vllm_flag_table_is_written_from_the_flags() -> None:
    """docs/roles/serve.md's owned flags are roles/serve/flags.py's table, kept by `--check`."""
    from halo_cluster.roles.serve import flags

    page = (ROOT / "docs" / "roles" / "serve.md").read_text()
    assert flags.markdown_table() in page
    assert all(f"`--{flag.name}`" in page for flag in flags.FLAGS)
    assert docs.with_named(page, "flags", "X\n") != page  # the block is found, and replaced
