"""The cluster's lock, `halo-cluster.lock` in the state folder (config/state.py): the digest
every node runs, once resolved (docs/roles/container.md), the cluster's members and the nodes that
left it (docs/roles/serve.md), the digests the head's other images were resolved to
(`pins`: Prometheus' and Grafana's, docs/roles/metrics.md), and the history line the head keeps of
each change to it.

The lock is JSON, keys sorted, indented by 1, written atomically (a temporary file beside it,
then `rename`), so that a run that stops half-way leaves the old lock or the new one, never a
torn one. Every writer reads, changes and replaces it while it holds one file lock (`update`:
`flock` on the sibling `.halo-cluster.lock.flock`, config/lockfile.py), so that two commands at
once (an upgrade and the deploys it runs, two deploys) never lose each other's record. Reading
it checks the file and its shape first (`lockschema`): every problem is one
`PATH: KEY: what is wrong (the fix)` line, before any host is contacted; writing writes only
what reading takes.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import secrets
import shutil
import socket
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from halo_cluster.config import lockfile, lockschema, state

LOCK_FILE = "halo-cluster.lock"
HISTORY = ".local/state/halo-cluster/history.jsonl"  # below the cluster user's home, on the head
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
# set by `halo-cluster upgrade` and `rollback` for the deploys they run: those deploys run on a
# lock in trial, and on a cluster.yml that already names the image the upgrade moves to
UPGRADING = "HALO_CLUSTER_UPGRADING"


@dataclass(frozen=True)
class Build:
    """One build the cluster ran: the lock's `previous` (the way back `halo-cluster rollback`
    takes) with the time it was resolved and started serving, and the versions inside it."""

    digest: str
    resolved: str = ""
    serving_since: str = ""
    ray: str = ""
    vllm: str = ""


@dataclass(frozen=True)
class Rejected:
    """A build whose gate failed: `halo-cluster upgrade` refuses it again without `--retry`."""

    digest: str
    at: str
    reason: str


@dataclass(frozen=True)
class Member:
    name: str
    data_address: str


@dataclass(frozen=True)
class Departed:
    """A node that left cluster.yml: the head stops what of ours it still runs."""

    name: str
    data_address: str
    since: str


@dataclass(frozen=True)
class Pin:
    """An image beside the cluster's own, by its key in cluster.yml (`metrics.image`): the tag
    it names, resolved once to `digest`, which every later run keeps while the key names the
    same tag."""

    reference: str
    digest: str
    resolved: str = ""


@dataclass(frozen=True)
class Lock:
    """What the lock says; `digest` is "" before the first resolve recorded one. `trial`: the
    cluster was switched to `digest` by an upgrade whose gate has not passed yet."""

    head: str
    reference: str
    digest: str
    resolved: str = ""
    ray: str = ""
    vllm: str = ""
    serving_since: str = ""
    trial: bool = False
    previous: Build | None = None
    rejected: tuple[Rejected, ...] = ()

    members: tuple[Member, ...] = ()  # the nodes the lock was last written for, in order
    left: tuple[Departed, ...] = ()  # nodes removed from cluster.yml since: probed by the head
    # the other images' pins by their key in cluster.yml (`lockschema.PINNED`)
    pins: dict[str, Pin] = field(default_factory=dict)

    def current(self) -> Build:
        return Build(self.digest, self.resolved, self.serving_since, self.ray, self.vllm)

    def pinned(self, key: str, reference: str) -> str:
        """The digest the lock pins for `key` while cluster.yml names `reference` there, ""
        for another reference (resolved anew) or none yet."""
        pin = self.pins.get(key)
        return pin.digest if pin is not None and pin.reference == reference else ""

    def pin(self, key: str, pin: Pin) -> Lock:
        """The lock with `key` pinned to `pin` (any pin of another reference replaced)."""
        return replace(self, pins={**self.pins, key: pin})


def members_of(nodes: dict[str, str]) -> tuple[Member, ...]:
    """The members from host data's {name: data address}, in the config's order."""
    return tuple(Member(name, address) for name, address in nodes.items())


def moved(lock: Lock, members: tuple[Member, ...]) -> tuple[tuple[Departed, ...], list[str]]:
    """The lock's `left` once the config's `members` are the cluster, and the names that leave
    now: a recorded member the config no longer names moves to `left`; a node the config names
    again (by name, or a new node on a departed one's address) is taken out of it."""
    names = {m.name for m in members}
    addresses = {m.data_address for m in members}
    kept = [d for d in lock.left if d.name not in names and d.data_address not in addresses]
    known = {d.name for d in kept}
    leaving = [m for m in lock.members if m.name not in names and m.name not in known]
    since = now()
    left = (*kept, *(Departed(m.name, m.data_address, since) for m in leaving))
    return left, [m.name for m in leaving]


def path(config_folder: Path) -> Path:
    """Where a deploy writes the lock of the config in `config_folder`: in the state folder."""
    return state.folder(config_folder) / LOCK_FILE


def old_path(config_folder: Path) -> Path:
    """Where versions before the state folder kept the lock: beside the config."""
    return config_folder.resolve() / LOCK_FILE


def found(config_folder: Path) -> Path:
    """Where the lock is read: the state folder's; else, until a deploy moves it (`move_old`),
    the one beside the config. A read that writes nothing finds it either way; an upgrade reads
    and writes the same one its deploys do."""
    new, old = path(config_folder), old_path(config_folder)
    return old if not os.path.lexists(new) and os.path.lexists(old) else new


def move_old(config_folder: Path) -> str | None:
    """A deploy's first step: the lock beside the config moved into the state folder, when the
    state folder has none yet; the line saying so, or None when there was nothing to move."""
    new, old = path(config_folder), old_path(config_folder)
    if new == old or os.path.lexists(new) or not os.path.lexists(old):
        return None
    new.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(old, new)
    return f"{old}: moved into the state folder, now {new}"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def read(path: Path) -> tuple[Lock | None, list[str]]:
    """The lock at `path` (None when there is none yet) and its problems, one line each
    (`lockschema`: the file, its JSON and every key checked)."""
    try:
        doc = lockschema.load(path)
    except lockschema.Refused as refused:
        return None, refused.problems
    return (None if doc is None else _lock(doc)), []


def _lock(doc: dict[str, Any]) -> Lock:
    """The Lock of a checked document."""
    image, current = doc["image"], doc["image"]["current"]
    previous = image.get("previous")
    return Lock(
        doc["head"],
        image["reference"],
        current["digest"],
        trial=current.get("trial", False),
        previous=None if previous is None else _build(previous),
        rejected=tuple(
            Rejected(r["digest"], r["at"], r["reason"]) for r in image.get("rejected", ())
        ),
        members=tuple(Member(n["name"], n["data_address"]) for n in doc.get("members", ())),
        left=tuple(Departed(n["name"], n["data_address"], n["since"]) for n in doc.get("left", ())),
        pins={
            f"{section}.{name}": Pin(pin["reference"], pin["digest"], pin.get("resolved", ""))
            for section in lockschema.PINNED
            for name, pin in doc.get(section, {}).items()
        },
        **{key: current.get(key, "") for key in BUILD_TEXT},
    )


BUILD_TEXT = ("resolved", "serving_since", "ray", "vllm")  # a build's keys beside its digest


def _build(found: dict[str, Any]) -> Build:
    return Build(found["digest"], **{key: found.get(key, "") for key in BUILD_TEXT})


def _build_document(build: Build) -> dict[str, Any]:
    """A build's keys, those unknown ("") left out; a time or version in a form the lock does
    not take (a hand-edited history's, an image's odd version) is unknown too."""
    found: dict[str, Any] = {"digest": build.digest}
    for key in BUILD_TEXT:
        value = getattr(build, key)
        check = lockschema.BUILD[key].check
        if value and callable(check) and check(value) is None:
            found[key] = value
    return found


def one_line(text: str) -> str:
    """A free text (a gate's reason) as the lock keeps it: as it is when the reader takes it,
    else made one printable line, cut to its bound."""
    if lockschema.reason(text) is None:
        return text
    line = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return line[: lockschema.MAX_REASON] or "?"


def document(lock: Lock) -> dict[str, Any]:
    """The lock as JSON; the newest entries of `rejected` and `left` within their bounds."""
    image: dict[str, Any] = {
        "reference": lock.reference,
        "current": _build_document(lock.current()) | {"trial": lock.trial},
    }
    if lock.previous is not None:
        image["previous"] = _build_document(lock.previous)
    if lock.rejected:
        rejected = lock.rejected[-lockschema.MAX_REJECTED :]
        image["rejected"] = [asdict(replace(r, reason=one_line(r.reason))) for r in rejected]
    return {
        "format": lockschema.FORMAT,
        "head": lock.head,
        "image": image,
        "members": [asdict(m) for m in lock.members],
        "left": [asdict(d) for d in lock.left[-lockschema.MAX_LEFT :]],
        **_pins_document(lock.pins),
    }


def _pins_document(pins: dict[str, Pin]) -> dict[str, Any]:
    """The pins nested by their key in cluster.yml (`metrics.image` -> "metrics": {"image":
    ...}); none, no key (the lock an older version reads); an unknown time left out."""
    found: dict[str, Any] = {}
    for key, pin in sorted(pins.items()):
        section, _, name = key.partition(".")
        written = {"reference": pin.reference, "digest": pin.digest}
        if pin.resolved and lockschema.time(pin.resolved) is None:
            written["resolved"] = pin.resolved
        found.setdefault(section, {})[name] = written
    return found


def update(
    path: Path, change: Callable[[Lock | None], Lock | None]
) -> tuple[Lock | None, list[str]]:
    """The lock at `path` read, changed and replaced under its file lock (`lockfile.held`):
    `change` gets the lock as it is now (None: none yet) and returns the one to write (None:
    nothing); it runs while the others wait, so it reaches no node. The lock now there and, as
    `read` says them, the problems of one it could not read (then nothing is written)."""
    with lockfile.held(path):
        found, problems = read(path)
        if problems:
            return None, problems
        changed = change(found)
        if changed is None or changed == found:
            return found, []
        _replace(path, changed)
        return changed, []


def write(path: Path, lock: Lock) -> None:
    """The whole lock replaced by `lock` under the file lock, whatever it held: a test's or a
    setup's; a command changes the lock by `update`, which keeps what others recorded."""
    with lockfile.held(path):
        _replace(path, lock)


def with_image(found: Lock | None, source: Lock) -> Lock:
    """`found`, the lock as it is now, with `source`'s image: its reference, build, trial,
    previous and rejected, which an upgrade or rollback decides; the records the deploys keep
    (head, members, left, pins) as found. `source` when there is no lock now."""
    if found is None:
        return source
    return replace(found, **{name: getattr(source, name) for name in IMAGE_FIELDS})


IMAGE_FIELDS = ("reference", "digest", "resolved", "ray", "vllm", "serving_since", "trial",
                "previous", "rejected")  # fmt: skip


def _replace(path: Path, lock: Lock) -> None:
    """Write the lock atomically (`lockfile.replace`), its file lock held. Only a lock `read`
    takes is written: any other is a bug here, raised (ValueError) before the file is touched."""
    doc = document(lock)
    problems = lockschema.check(path, doc)
    if problems:
        raise ValueError("; ".join(problems))
    lockfile.replace(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")


RUN = secrets.token_hex(4)  # one per command invocation: joins the lines one run writes


def history_line(event: str, **fields: Any) -> str:
    """One line of the head's history (JSON Lines): the fields every line has, then the event's."""
    line = {
        "v": 1,
        "time": now(),
        "event": event,
        "run": RUN,
        "by": f"{getpass.getuser()}@{socket.gethostname()}",
    }
    return json.dumps(line | fields, sort_keys=False, separators=(",", ":"))
