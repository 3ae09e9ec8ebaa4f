"""Property (issue 34, items 1 and 10): every lock the reader accepts survives write then read
unchanged; every lock mutated from a valid one is either accepted (then it too survives) or
refused with one line per problem naming the file, never an exception. Beside
test_config_property.py, whose strategies are cluster.yml's."""

from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from halo_cluster.config import lock as locks
from halo_cluster.config import lockschema
from halo_cluster.config.rules import NODE_NAME

FOLDER = Path(tempfile.mkdtemp(prefix="halo-lock-property-"))
PATH = FOLDER / locks.LOCK_FILE
SETTINGS = settings(
    max_examples=int(os.environ.get("HALO_EXAMPLES", "60")),
    deadline=2000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

NAMES = st.from_regex(NODE_NAME, fullmatch=True)
ADDRESSES = st.ip_addresses(v=4).map(str)
DIGESTS = st.text("0123456789abcdef", min_size=64, max_size=64).map(lambda h: f"sha256:{h}")
TIMES = st.datetimes(min_value=datetime(1000, 1, 1)).map(
    lambda t: t.strftime(lockschema.TIME_FORMAT)
)
VERSIONS = st.from_regex(lockschema.VERSION, fullmatch=True)
REASONS = st.text(min_size=1, max_size=lockschema.MAX_REASON).filter(str.isprintable)
REFERENCES = st.sampled_from(
    [
        "docker.io/kyuz0/vllm-therock-gfx1151:latest",
        "127.0.0.1:5000/kyuz0/x:dev",
        "x",
        f"docker.io/kyuz0/x@sha256:{'0' * 64}",
    ]
)
# what a hostile or careless hand writes into a lock
HOSTILE = st.sampled_from(
    [
        "",
        ";reboot",
        "$(reboot)",
        "a\nb",
        "\x1b[2J",
        "x" * 300,
        "true",
        "\u0661",  # an Arabic-Indic digit one
        "2026-13-45T00:00:00Z",
        "sha256:12",
        "192.168.100.01",
        True,
        1,
        1.5,
        None,
        [],
        {},
        [[[[[[[[[[]]]]]]]]]],
        10**30,
    ]
)


def _build(digest: st.SearchStrategy[str]) -> st.SearchStrategy[locks.Build]:
    optional = st.one_of(st.just(""), TIMES)
    return st.builds(
        locks.Build, digest, optional, optional, st.just("") | VERSIONS, st.just("") | VERSIONS
    )


@st.composite
def valid_locks(draw: Any) -> locks.Lock:
    current = draw(_build(DIGESTS))
    previous = draw(st.none() | _build(DIGESTS.filter(lambda d: d != current.digest)))
    rejected = draw(st.lists(st.builds(locks.Rejected, DIGESTS, TIMES, REASONS), max_size=3))
    unique = {"unique_by": lambda n: n.name, "max_size": 4}
    members = draw(st.lists(st.builds(locks.Member, NAMES, ADDRESSES), **unique))
    left = draw(st.lists(st.builds(locks.Departed, NAMES, ADDRESSES, TIMES), **unique))
    # the head is among the members whenever they are recorded
    head = draw(st.sampled_from([m.name for m in members]) if members else NAMES)
    return locks.Lock(
        head,
        draw(REFERENCES),
        current.digest,
        current.resolved,
        current.ray,
        current.vllm,
        current.serving_since,
        draw(st.booleans()),
        previous,
        tuple(rejected),
        tuple(members),
        tuple(left),
    )


def accepted_survives(lock: locks.Lock) -> None:
    """`lock`, which the reader accepted, written and read back: the same lock."""
    locks.write(PATH, lock)
    assert locks.read(PATH) == (lock, [])


@SETTINGS
@given(valid_locks())
def test_every_valid_lock_survives_write_then_read(lock: locks.Lock) -> None:
    accepted_survives(lock)


def paths(doc: Any, at: tuple = ()) -> list[tuple]:
    """Every key and index of a document, as the path to it."""
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    )
    found = []
    for key, value in items:
        found += [(*at, key), *paths(value, (*at, key))]
    return found


def mutate(doc: dict, data: Any) -> str:
    """The lock's text after one mutation of its document (or of its text)."""
    how = data.draw(st.sampled_from(["hostile", "delete", "unknown", "wrap", "twice", "nest"]))
    where = data.draw(st.sampled_from(paths(doc)))
    parent = doc
    for key in where[:-1]:
        parent = parent[key]
    key = where[-1]
    if how == "hostile":
        parent[key] = data.draw(HOSTILE)
    elif how == "delete":
        del parent[key]
    elif how == "unknown" and isinstance(parent, dict):
        parent[data.draw(st.sampled_from(["x", "\x1b", "by", "trial", "a" * 300]))] = 1
    elif how == "wrap":
        parent[key] = [parent[key]]
    text = json.dumps(doc)
    if how == "twice":
        text = text.replace("{", '{"format": 1, ', 1)
    elif how == "nest":
        depth = data.draw(st.integers(min_value=1, max_value=20))
        text = text.replace('"format"', f'"x": {"[" * depth}{"]" * depth}, "format"', 1)
    return text


@SETTINGS
@given(valid_locks(), st.data())
def test_a_mutated_lock_is_accepted_whole_or_refused_in_one_line_per_problem(
    lock: locks.Lock, data: Any
) -> None:
    PATH.write_text(mutate(locks.document(lock), data))
    found, problems = locks.read(PATH)
    if found is not None:
        assert problems == []
        accepted_survives(found)
        return
    assert problems
    for line in problems:
        assert line.startswith(f"{PATH}: ") and line.removeprefix(f"{PATH}: ").strip(), line
        assert "\n" not in line and "\x1b" not in line and len(line) < 600, line
