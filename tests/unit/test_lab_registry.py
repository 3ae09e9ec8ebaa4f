"""A new lab starts on the seed build: `latest` in the shared registry storage is put back where
the seed put it, whatever an earlier lab published (`python -m lab publish-image`)."""

from pathlib import Path

from lab import node, registry

SEED = "sha256:" + "a" * 64
PUBLISHED = "sha256:" + "b" * 64


def shared(tmp_path: Path) -> node.Shared:
    return node.Shared(tmp_path / "repo", tmp_path / "image", tmp_path / "registry")


def test_a_new_lab_finds_latest_on_the_seed_build(tmp_path: Path) -> None:
    storage = shared(tmp_path)
    link = storage.registry / registry.LATEST_LINK
    link.parent.mkdir(parents=True)
    link.write_text(PUBLISHED)  # an earlier lab's publish-image moved the tag
    (storage.registry / ".seeded").write_text(SEED)
    registry.reset_latest(storage)
    assert link.read_text() == SEED


def test_a_registry_seeded_without_its_digest_is_seeded_again(tmp_path: Path) -> None:
    storage = shared(tmp_path)
    storage.registry.mkdir()
    (storage.registry / ".seeded").touch()
    registry.reset_latest(storage)
    assert not (storage.registry / ".seeded").exists()


def test_the_lab_serves_the_tag_the_example_config_names() -> None:
    """`init` writes cluster.example.yml's image; the lab tags its seed build with that tag."""
    tag = registry.example_tag()
    assert tag and tag != "latest" and "/" not in tag, tag
