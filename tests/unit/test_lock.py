"""The lock beside cluster.yml (halo_cluster/config/lock.py) and the container role's refusals
of a lock that is not this config's, each one line naming the file or the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from halo_cluster.config import lock as locks
from halo_cluster.config.loader import ConfigError, parse_cluster
from halo_cluster.config.rules import image_digest, image_name
from tests.recorded import skopeo_digest

NAME = "docker.io/kyuz0/vllm-therock-gfx1151"
DIGEST = skopeo_digest()
OTHER = "sha256:" + "ab" * 32
CONFIG = (
    "cluster_user: vllm\nnodes:\n"
    "  - {name: halo1, ssh: {host: 10.0.0.11}, data: {interface: auto}}\n"
    "  - {name: halo2, ssh: {host: 10.0.0.12}, data: {interface: auto}}\n"
)


def load(folder: Path, extra: str = ""):
    return parse_cluster(yaml.safe_load(extra + CONFIG), base_dir=folder)


def problems(folder: Path, extra: str = "") -> list[str]:
    with pytest.raises(ConfigError) as raised:
        load(folder, extra)
    return raised.value.problems


def write(folder: Path, head: str = "halo1", reference: str = f"{NAME}:latest") -> Path:
    path = folder / locks.LOCK_FILE
    locks.write(path, locks.Lock(head, reference, DIGEST, "2026-12-01T10:00:00Z", "2.60.0", "0"))
    return path


def test_round_trip_sorted_indented_by_one_and_atomic(tmp_path: Path) -> None:
    path = write(tmp_path)
    text = path.read_text()
    assert text == json.dumps(json.loads(text), indent=1, sort_keys=True) + "\n"
    assert json.loads(text)["image"]["current"]["trial"] is False
    assert locks.read(path) == (locks.Lock("halo1", f"{NAME}:latest", DIGEST, *_times()), [])
    assert [p.name for p in tmp_path.iterdir()] == [locks.LOCK_FILE]  # no temporary file left


def _times() -> tuple[str, str, str]:
    return "2026-12-01T10:00:00Z", "2.60.0", "0"


def test_no_lock_yet_means_no_digest(tmp_path: Path) -> None:
    container = load(tmp_path).container
    assert (container.digest, container.pinned, container.locked) == ("", "", False)
    assert container.lock == str(tmp_path.resolve() / locks.LOCK_FILE)


def test_the_lock_digest_is_the_cluster_digest(tmp_path: Path) -> None:
    write(tmp_path)
    container = load(tmp_path).container
    assert container.pinned == f"{NAME}@{DIGEST}" and container.locked


def test_a_configured_digest_needs_no_resolve(tmp_path: Path) -> None:
    container = load(tmp_path, f"image: {NAME}@{OTHER}\n").container
    assert container.pinned == f"{NAME}@{OTHER}" and not container.locked


def test_the_name_at_the_lock_digest_is_the_same_image(tmp_path: Path) -> None:
    write(tmp_path)
    assert load(tmp_path, f"image: {NAME}@{DIGEST}\n").container.locked


def test_a_changed_image_is_refused_with_its_fix(tmp_path: Path) -> None:
    path = write(tmp_path)
    assert problems(tmp_path, f"image: {NAME}:dev\n") == [
        f"cluster.yml: image: changed from {NAME}:latest to {NAME}:dev: halo-cluster.lock pins "
        f"{DIGEST}; `halo-cluster upgrade` moves the cluster to {NAME}:dev (pulled, switched and "
        "gated, rolled back on failure), or set image back"
    ]
    assert str(path.resolve()) not in problems(tmp_path, f"image: {NAME}:dev\n")[0]  # no delete
    assert "changed from" in problems(tmp_path, f"image: {NAME}@{OTHER}\n")[0]


def test_the_lock_of_another_cluster_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, head="node1")
    assert problems(tmp_path) == [
        f"{path.resolve()}: the lock of another cluster (head node1): one cluster per folder"
    ]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{", "is not JSON"),
        ("[]", "is not a JSON object"),
        ('{"format": 2}', "format: 2 is not 1"),
        ('{"format": 1, "image": {"reference": "x"}}', "head: missing"),
        (
            '{"format": 1, "head": "halo1", "image": {"reference": "x", "current": '
            '{"digest": "sha256:12"}}}',
            "image.current.digest: 'sha256:12' is not sha256:<64 hex digits>",
        ),
    ],
)
def test_a_malformed_lock_is_one_line_naming_the_key(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / locks.LOCK_FILE
    path.write_text(text)
    found = problems(tmp_path)
    assert found[0].startswith(f"{path.resolve()}: ") and says in found[0], found


def test_history_line_has_the_common_fields() -> None:
    line = json.loads(locks.history_line("resolved", digest=DIGEST, changed=True))
    assert list(line)[:5] == ["v", "time", "event", "run", "by"]
    assert line["v"] == 1 and line["event"] == "resolved" and line["digest"] == DIGEST
    assert len(line["run"]) == 8 and "@" in line["by"] and line["time"].endswith("Z")
    assert "\n" not in locks.history_line("resolved", reason="two\nlines")


@pytest.mark.parametrize(
    ("reference", "name"),
    [
        (f"{NAME}:latest", NAME),
        (NAME, NAME),
        (f"{NAME}@{DIGEST}", NAME),
        (f"{NAME}:latest@{DIGEST}", NAME),
        ("127.0.0.1:5000/kyuz0/x:dev", "127.0.0.1:5000/kyuz0/x"),
        ("127.0.0.1:5000/kyuz0/x", "127.0.0.1:5000/kyuz0/x"),  # the port is not a tag
    ],
)
def test_the_pinned_name_drops_tag_and_digest(reference: str, name: str) -> None:
    assert image_name(reference) == name
    assert image_digest(reference) == (DIGEST if "@" in reference else None)


def test_the_lock_pins_its_own_name_while_the_image_moves_to_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`image` moved to another repository name: the upgrade's own loads accept it, and the
    pin stays what the nodes run (the lock's name at its digest), not the new name at the old
    digest, which no node runs and which the upgrade's converged check would see as drift."""
    write(tmp_path)
    monkeypatch.setenv(locks.UPGRADING, "1")
    container = load(tmp_path, "image: docker.io/someone/vllm-fork:latest\n").container
    assert (container.digest, container.pinned) == (DIGEST, f"{NAME}@{DIGEST}")
