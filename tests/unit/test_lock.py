"""The lock beside cluster.yml (halo_cluster/config/lock.py) and the container role's refusals
of a lock that is not this config's, each one line naming the file or the key."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from halo_cluster.config import lock as locks
from halo_cluster.config import lockschema, rules
from halo_cluster.config.rules import image_digest, image_name
from tests.recorded import skopeo_digest
from tests.unit.helpers_lock import load, problems

NAME = "docker.io/kyuz0/vllm-therock-gfx1151"
DIGEST = skopeo_digest()
OTHER = "sha256:" + "ab" * 32


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
    # no temporary file left; the writers' file lock stays (removed, a waiter holds a lost one)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f".{locks.LOCK_FILE}.flock",
        locks.LOCK_FILE,
    ]


def _times() -> tuple[str, str, str]:
    return "2026-12-01T10:00:00Z", "2.60.0", "0"


def test_no_lock_yet_means_no_digest(tmp_path: Path) -> None:
    container = load(tmp_path).container
    assert (container.digest, container.pinned, container.locked) == ("", "", False)
    assert container.lock == str(tmp_path.resolve() / ".halo-cluster" / locks.LOCK_FILE)


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


def test_a_malformed_lock_is_one_line_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / locks.LOCK_FILE
    path.write_text('{"format": 1, "image": {"reference": "x"}}')
    assert problems(tmp_path) == [
        f"{path.resolve()}: head: missing",
        f"{path.resolve()}: image.current: missing",
    ]


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


# issue 34, item 1: the lock has a schema. Each refusal is one line `PATH: KEY: what (fix)`,
# never a traceback, a hang or the value raw.
def valid() -> dict:
    """A lock with every key: a build before, one rejected, two members, one departed."""
    build = {"digest": DIGEST, "resolved": "2026-12-01T10:00:00Z", "ray": "2.60.0"}
    return {
        "format": 1,
        "head": "halo1",
        "image": {
            "reference": f"{NAME}:latest",
            "current": {**build, "serving_since": "2026-12-01T10:05:00Z", "trial": False},
            "previous": {**build, "digest": OTHER, "vllm": "0.33.0+rocm"},
            "rejected": [{"digest": OTHER, "at": "2026-12-01T11:00:00Z", "reason": "gate [x]"}],
        },
        "members": [
            {"name": "halo1", "data_address": "192.168.100.1"},
            {"name": "halo2", "data_address": "192.168.100.2"},
        ],
        "left": [
            {"name": "halo3", "data_address": "192.168.100.3", "since": "2026-12-02T00:00:00Z"}
        ],
    }


def read_lines(path: Path) -> list[str]:
    """The problems of the lock at `path`: at least one, each one line naming the file."""
    found, lines = locks.read(path)
    assert found is None and lines, lines
    for line in lines:
        assert line.startswith(f"{path}: ") and "\n" not in line and "\x1b" not in line, line
        assert len(line) < 400, line
    return lines


def test_every_key_read_back(tmp_path: Path) -> None:
    path = tmp_path / locks.LOCK_FILE
    path.write_text(json.dumps(valid()))
    found, lines = locks.read(path)
    assert lines == [] and found is not None
    assert found.previous == locks.Build(OTHER, "2026-12-01T10:00:00Z", "", "2.60.0", "0.33.0+rocm")
    assert found.rejected == (locks.Rejected(OTHER, "2026-12-01T11:00:00Z", "gate [x]"),)
    assert [m.name for m in found.members] == ["halo1", "halo2"]
    assert found.left == (locks.Departed("halo3", "192.168.100.3", "2026-12-02T00:00:00Z"),)
    locks.write(path, found)
    assert locks.read(path) == (found, [])


def mutated(change) -> dict:
    doc = valid()
    change(doc)
    return doc


def _set(*keys_value):
    *keys, value = keys_value

    def change(doc: dict) -> None:
        target = doc
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value

    return change


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (_set("image", "current", "trial", "true"), "image.current.trial: 'true' is not true or"),
        (_set("format", True), "format: True is not the integer 1"),
        (_set("format", 1.0), "format: 1.0 is not the integer 1"),
        (_set("image", "previous", "digest", DIGEST), "image.previous.digest: is image.current"),
        (_set("members", 0, "name", ";reboot"), "members[0].name: ';reboot' is not a node name"),
        (_set("members", 1, "name", "a\nb"), "members[1].name: 'a\\nb' is not a node name"),
        (_set("members", 0, "name", "x" * 300), "members[0].name: 'xxx"),
        (_set("left", 0, "name", "$(reboot)"), "left[0].name: '$(reboot)' is not a node name"),
        (_set("head", "\x1b[2J"), "head: '\\x1b[2J' is not a node name"),
        (_set("head", "halo3"), "head: 'halo3' is not among the 2 members (restore the lock"),
        (_set("padding", "x"), "padding: unknown key"),
        (_set("image", "tag", "x"), "image.tag: unknown key"),
        (_set("image", "current", "by", "x"), "image.current.by: unknown key"),
        (_set("members", 0, "role", "head"), "members[0].role: unknown key"),
        (_set("\x1b", 1), "'\\x1b': unknown key"),
        (_set("members", 0, "data_address", "192.168.100.01"), "is not an IPv4 address"),
        (_set("members", 1, "name", "halo1"), "members: names a node twice"),
        (_set("left", 0, "since", "2026-13-45T00:00:00Z"), "'2026-13-45T00:00:00Z' is not a real"),
        (_set("image", "current", "resolved", "2026-12-01 10:00:00"), "is not a UTC time"),
        (_set("image", "rejected", 0, "at", "today"), "rejected[0].at: 'today' is not a UTC"),
        (_set("image", "current", "serving_since", ""), "image.current.serving_since: '' is not"),
        (_set("image", "current", "digest", "sha256:12"), "'sha256:12': a sha256 digest is 64"),
        (_set("image", "current", "digest", 7), "image.current.digest: 7 is not a digest"),
        (_set("image", "current", "vllm", "0.1 rc" * 20), "image.current.vllm: "),
        (_set("image", "rejected", 0, "reason", "a\nb"), "reason: 'a\\nb' is not one line of"),
        (_set("image", "rejected", [{}] * 257), "image.rejected: holds 257 items, more than 256 ("),
        (_set("members", {"name": "halo1"}), "members: {'name': 'halo1'} is not a list of objects"),
        (_set("image", "reference", "x y"), "image.reference: 'x y' is not an image reference"),
        (_set("image", []), "image: [] is not an object"),
    ],
)  # fmt: skip
def test_a_lock_of_a_wrong_shape_is_refused_in_one_line(tmp_path: Path, change, says: str) -> None:
    path = tmp_path / locks.LOCK_FILE
    path.write_text(json.dumps(mutated(change)))
    lines = read_lines(path)
    assert len(lines) == 1 and says in lines[0], lines


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{", "is not JSON (Expecting property name"),
        ("[]", "[] is not a JSON object"),
        ('{"format": 2, "x": 1}', "format: 2 is not the integer 1"),
        ('{"format": 1, "format": 1}', "the key 'format' is given twice (keep one)"),
        ("[" * 100_000 + "]" * 100_000, "nests deeper than 8 levels"),
        ('{"format": 1e99999}', "format: inf is not the integer 1"),
        ('{"format": ' + "9" * 5000 + "}", "is not JSON (Exceeds the limit"),
        (b"\xff", "is not UTF-8 text (byte 1"),
    ],
)
def test_a_lock_that_is_not_one_json_object_is_one_line(tmp_path: Path, text, says: str) -> None:
    path = tmp_path / locks.LOCK_FILE
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    lines = read_lines(path)
    assert len(lines) == 1 and says in lines[0], lines


def test_brackets_inside_strings_do_not_nest(tmp_path: Path) -> None:
    path = tmp_path / locks.LOCK_FILE
    path.write_text(json.dumps(mutated(_set("image", "rejected", 0, "reason", "[{" * 200))))
    assert locks.read(path)[1] == []


def test_padding_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / locks.LOCK_FILE
    path.write_text(json.dumps(valid()) + " " * 20_000_000)
    assert read_lines(path) == [
        f"{path}: is larger than 1024 KiB (restore the lock from git or from the checkout that "
        "deployed)"
    ]


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    path = tmp_path / locks.LOCK_FILE
    os.mkfifo(path)
    signal.alarm(10)  # a blocked open fails the test instead of hanging it
    try:
        lines = read_lines(path)
    finally:
        signal.alarm(0)
    assert lines == [f"{path}: is not a regular file (restore the lock from git or from the "
                     "checkout that deployed)"]  # fmt: skip


def test_a_symlink_to_a_device_or_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cluster" / locks.LOCK_FILE
    path.parent.mkdir()
    path.symlink_to("/dev/zero")
    assert "is a symlink out of its folder, to '/dev/zero'" in read_lines(path)[0]
    outside = tmp_path / "elsewhere.lock"
    outside.write_text(json.dumps(valid()))
    path.unlink()
    path.symlink_to(outside)
    assert "is a symlink out of its folder" in read_lines(path)[0]
    inside = path.parent / "kept" / "the.lock"
    inside.parent.mkdir()
    inside.write_text(json.dumps(valid()))
    path.unlink()
    path.symlink_to(inside)
    assert locks.read(path)[1] == []  # a regular file inside the folder
    (path.parent / "zero").symlink_to("/dev/zero")
    path.unlink()
    path.symlink_to(path.parent / "zero")
    assert "is a symlink out of its folder" in read_lines(path)[0]
    path.unlink()
    path.symlink_to(path.parent / "missing")
    assert "is a symlink to nothing" in read_lines(path)[0]


def test_the_config_load_refuses_a_symlink_out_of_the_folder(tmp_path: Path) -> None:
    """The container role reads the lock beside cluster.yml, not where a symlink leads."""
    folder, elsewhere = tmp_path / "cluster", tmp_path / "other"
    folder.mkdir()
    elsewhere.mkdir()
    write(elsewhere)
    (folder / locks.LOCK_FILE).symlink_to(elsewhere / locks.LOCK_FILE)
    found = problems(folder)
    assert len(found) == 1 and "is a symlink out of its folder" in found[0], found


def test_only_what_read_takes_is_written(tmp_path: Path) -> None:
    path = tmp_path / locks.LOCK_FILE
    with pytest.raises(ValueError, match="head: ';reboot' is not a node name"):
        locks.write(path, locks.Lock(";reboot", f"{NAME}:latest", DIGEST))
    assert not path.exists()
    gate = "gate failed: \x1b[2J" + "slow\n" * 400
    lock = locks.Lock("halo1", f"{NAME}:latest", DIGEST, "yesterday", "2.60 .0", "0.33\n",
                      rejected=(locks.Rejected(OTHER, "2026-12-01T11:00:00Z", gate),))  # fmt: skip
    locks.write(path, lock)
    found, lines = locks.read(path)
    assert lines == [] and found is not None
    assert (found.resolved, found.ray, found.vllm) == ("", "", "")  # unknown, not refused
    assert found.rejected[0].reason.startswith("gate failed: [2Jslow slow")
    assert len(found.rejected[0].reason) == 500


def test_free_text_is_one_rule_for_the_lock_and_the_known_versions() -> None:
    """A gate's reason and a known version's symptom: config/rules.py's `line`, one wording."""
    from halo_cluster.roles.os import schema

    for value in ("a\nb", "\x1b[2J", 7):
        assert lockschema.reason(value) == schema.line_problem(value) is not None
    assert lockschema.reason("x" * 501) == rules.line(500)("x" * 501)
    assert "longer than 500 characters" in str(lockschema.reason("x" * 501))
    assert lockschema.reason("") is not None and schema.line_problem("") is None
