"""Prometheus' and Grafana's images pinned in the cluster's lock (issue 37, items 2 and 4): the
pins read back as written, a lock an older version wrote (no pins) still loads and is written
back unchanged, a malformed pin is one line naming the file and the key before any host is
contacted, and the metrics role's derivation takes a pin only for the tag it was resolved from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from halo_cluster.config import lock as locks
from halo_cluster.config import lockschema
from halo_cluster.roles.metrics import grafana, model, prometheus
from halo_cluster.tools.status.view import image_line
from tests.recorded import skopeo_digest
from tests.unit.helpers_lock import load, problems

NAME = "docker.io/kyuz0/vllm-therock-gfx1151"
DIGEST = skopeo_digest()
PROMETHEUS = "quay.io/prometheus/prometheus"
TAG = f"{PROMETHEUS}:v3.5.0"  # metrics.image's default
PINNED = "sha256:" + "cd" * 32
GRAFANA = "docker.io/grafana/grafana:12.3.1"
ON = "metrics: {enabled: true}\n"
# a lock as a version before the pins wrote it (docs/roles/container.md's form, format 1)
OLD = {
    "format": 1,
    "head": "halo1",
    "image": {
        "current": {"digest": DIGEST, "resolved": "2026-12-01T10:00:00Z", "trial": False},
        "reference": f"{NAME}:latest",
    },
    "left": [],
    "members": [
        {"data_address": "192.168.100.1", "name": "halo1"},
        {"data_address": "192.168.100.2", "name": "halo2"},
    ],
}


def pinned_lock(folder: Path, **pins: locks.Pin) -> Path:
    """The cluster's lock beside the config with `pins` ({section_name: Pin})."""
    path = folder / locks.LOCK_FILE
    lock = locks.Lock("halo1", f"{NAME}:latest", DIGEST)
    for key, pin in pins.items():
        lock = lock.pin(key.replace("__", "."), pin)
    locks.write(path, lock)
    return path


def test_pins_round_trip_nested_as_in_cluster_yml(tmp_path: Path) -> None:
    pin = locks.Pin(TAG, PINNED, "2026-12-02T10:00:00Z")
    other = locks.Pin(GRAFANA, DIGEST)
    path = pinned_lock(tmp_path, metrics__image=pin, metrics__grafana_image=other)
    doc = json.loads(path.read_text())
    assert doc["metrics"] == {
        "image": {"reference": TAG, "digest": PINNED, "resolved": "2026-12-02T10:00:00Z"},
        "grafana_image": {"reference": GRAFANA, "digest": DIGEST},
    }
    found, lines = locks.read(path)
    assert lines == [] and found is not None
    assert found.pins == {"metrics.image": pin, "metrics.grafana_image": other}
    assert (found.pinned("metrics.image", TAG), found.pinned("metrics.image", f"{TAG}x")) == (
        PINNED,
        "",
    )
    locks.write(path, found)
    assert locks.read(path) == (found, [])


def test_an_older_lock_without_pins_loads_and_is_written_back_the_same(tmp_path: Path) -> None:
    path = tmp_path / locks.LOCK_FILE
    text = json.dumps(OLD, indent=1, sort_keys=True) + "\n"
    path.write_text(text)
    found, lines = locks.read(path)
    assert lines == [] and found is not None and found.pins == {}
    assert load(tmp_path, ON).metrics.locked == {}  # resolved on the head, then recorded
    locks.write(path, found)
    assert path.read_text() == text  # no `metrics` key: an older version still reads it


@pytest.mark.parametrize(
    ("pin", "says"),
    [
        ({"reference": TAG, "digest": "sha256:12"},
         "metrics.image.digest: 'sha256:12': a sha256 digest is 64"),
        ({"reference": TAG, "digest": 7}, "metrics.image.digest: 7 is not a digest"),
        ({"reference": TAG}, "metrics.image.digest: missing"),
        ({"reference": "\x1b[2J", "digest": PINNED},
         "metrics.image.reference: '\\x1b[2J' is not an image reference"),
        ({"reference": TAG, "digest": PINNED, "resolved": "now"},
         "metrics.image.resolved: 'now' is not a UTC time"),
        ({"reference": TAG, "digest": PINNED, "tag": "x"}, "metrics.image.tag: unknown key"),
    ],
)  # fmt: skip
def test_a_malformed_pin_is_one_line_naming_the_file_and_key(
    tmp_path: Path, pin: dict, says: str
) -> None:
    """Refused when cluster.yml is loaded: before any host is contacted, the value quoted."""
    path = tmp_path / locks.LOCK_FILE
    path.write_text(json.dumps(OLD | {"metrics": {"image": pin}}))
    lines = problems(tmp_path, ON)
    assert len(lines) == 1 and lines[0].startswith(f"{path.resolve()}: {says}"), lines
    assert "\n" not in lines[0] and "\x1b" not in lines[0]


def test_a_pin_of_a_key_the_lock_does_not_know_is_refused(tmp_path: Path) -> None:
    path = tmp_path / locks.LOCK_FILE
    path.write_text(json.dumps(OLD | {"metrics": {"alertmanager_image": {}}}))
    assert problems(tmp_path) == [
        f"{path.resolve()}: metrics.alertmanager_image: unknown key (this tool writes none)"
    ]
    with pytest.raises(ValueError, match="unknown key"):  # nor does the tool write one
        locks.write(
            path, locks.Lock("halo1", NAME, DIGEST).pin("metrics.x", locks.Pin(TAG, PINNED))
        )


def test_the_derivation_takes_a_pin_for_the_same_tag_only(tmp_path: Path) -> None:
    pinned_lock(tmp_path, metrics__image=locks.Pin(TAG, PINNED))
    assert load(tmp_path, ON).metrics.locked == {"metrics.image": f"{PROMETHEUS}@{PINNED}"}
    moved = "metrics: {enabled: true, image: 'quay.io/prometheus/prometheus:v3.6.0'}\n"
    assert load(tmp_path, moved).metrics.locked == {}  # a new tag: resolved again
    written = f"metrics: {{enabled: true, image: '{PROMETHEUS}@{DIGEST}'}}\n"
    assert load(tmp_path, written).metrics.locked == {}  # a digest: run as written
    assert load(tmp_path).metrics.locked == {}  # metrics off: nothing read


def test_the_pinned_keys_are_the_quadlets_keys() -> None:
    """One list of the images the lock pins: the lock's shape, the derivation and the two
    quadlets agree."""
    shape = {f"{s}.{n}" for s, names in lockschema.PINNED.items() for n in names}
    quadlets = {prometheus.QUADLET.key, grafana.QUADLET.key}
    assert shape == set(model.IMAGES) == quadlets


def test_status_shows_each_pin_under_the_clusters_image(tmp_path: Path) -> None:
    path = pinned_lock(tmp_path, metrics__image=locks.Pin(TAG, PINNED, "2026-12-02T10:00:00Z"))
    lock, _ = locks.read(path)
    assert image_line(lock).splitlines()[1:] == [
        f"metrics.image: {TAG} is {PINNED} (resolved 2026-12-02T10:00:00Z)"
    ]
