"""The cluster's lock, `halo-cluster.lock` beside cluster.yml: the digest every node runs, once
resolved (docs/roles/container.md), the cluster's members and the nodes that left it
(docs/roles/serve.md), and the history line the head keeps of each change to it.

The lock is JSON, keys sorted, indented by 1, written atomically (a temporary file beside it,
then `rename`), so that a run that stops half-way leaves the old lock or the new one, never a
torn one. Reading it checks its shape: every problem is one `halo-cluster.lock: KEY: what is
wrong` line, before any host is contacted.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import secrets
import socket
import tempfile
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

LOCK_FILE = "halo-cluster.lock"
FORMAT = 1
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

    def current(self) -> Build:
        return Build(self.digest, self.resolved, self.serving_since, self.ray, self.vllm)


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


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def read(path: Path) -> tuple[Lock | None, list[str]]:
    """The lock at `path` (None when there is none yet) and its problems, one line each."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, []
    except (OSError, UnicodeDecodeError) as exc:
        return None, [f"{path}: cannot be read ({exc})"]
    try:
        doc = json.loads(text)
    except ValueError as exc:
        return None, [f"{path}: is not JSON ({exc})"]
    return _parse(path, doc)


def _parse(path: Path, doc: Any) -> tuple[Lock | None, list[str]]:
    if not isinstance(doc, dict):
        return None, [f"{path}: is not a JSON object"]
    if doc.get("format") != FORMAT:
        return None, [f"{path}: format: {doc.get('format')!r} is not {FORMAT}"]
    image = doc.get("image")
    current = image.get("current") if isinstance(image, dict) else None
    problems = []
    if not isinstance(doc.get("head"), str) or not doc["head"]:
        problems.append(f"{path}: head: missing (the name of the cluster's head node)")
    if not isinstance(image, dict) or not isinstance(image.get("reference"), str):
        problems.append(f"{path}: image.reference: missing (cluster.yml's image, as written)")
    if not isinstance(current, dict) or not DIGEST.fullmatch(str(current.get("digest", ""))):
        got = current.get("digest") if isinstance(current, dict) else None
        problems.append(f"{path}: image.current.digest: {got!r} is not sha256:<64 hex digits>")
    if problems or not isinstance(image, dict) or not isinstance(current, dict):
        return None, problems
    text = {key: str(current.get(key) or "") for key in BUILD_TEXT}
    previous, rejected = _build(path, image.get("previous")), _rejected(path, image)
    if isinstance(previous, str) or isinstance(rejected, str):
        return None, [p for p in (previous, rejected) if isinstance(p, str)]
    members = _nodes(path, doc, "members", problems)
    left = _nodes(path, doc, "left", problems)
    if problems:
        return None, problems
    trial = current.get("trial") is True
    lock = Lock(doc["head"], image["reference"], current["digest"], trial=trial, **text)
    return replace(
        lock,
        previous=previous,
        rejected=rejected,
        members=tuple(Member(n["name"], n["data_address"]) for n in members),
        left=tuple(Departed(n["name"], n["data_address"], str(n.get("since", ""))) for n in left),
    ), []


BUILD_TEXT = ("resolved", "serving_since", "ray", "vllm")


def _build(path: Path, found: Any) -> Build | str | None:
    """The lock's `previous` (None when there is none), or its problem line."""
    if found is None:
        return None
    if not isinstance(found, dict) or not DIGEST.fullmatch(str(found.get("digest", ""))):
        got = found.get("digest") if isinstance(found, dict) else found
        return f"{path}: image.previous.digest: {got!r} is not sha256:<64 hex digits>"
    return Build(found["digest"], **{key: str(found.get(key) or "") for key in BUILD_TEXT})


def _rejected(path: Path, image: dict) -> tuple[Rejected, ...] | str:
    found = image.get("rejected", [])
    items = found if isinstance(found, list) else [None]
    if not all(isinstance(i, dict) and DIGEST.fullmatch(str(i.get("digest", ""))) for i in items):
        return f"{path}: image.rejected: each item needs a digest (sha256:<64 hex digits>)"
    items = [{"at": "", "reason": ""} | i for i in items]
    return tuple(Rejected(i["digest"], str(i.get("at", "")), str(i["reason"])) for i in items)


def _nodes(path: Path, doc: dict, key: str, problems: list[str]) -> list[dict]:
    """`members` or `left`: a list of {name, data_address}; absent in a lock written before
    membership was recorded (then the next load records it)."""
    nodes = doc.get(key, [])
    valid = isinstance(nodes, list) and all(
        isinstance(n, dict)
        and isinstance(n.get("name"), str)
        and isinstance(n.get("data_address"), str)
        for n in nodes
    )
    if not valid:
        problems.append(f"{path}: {key}: is not a list of {{name, data_address}}")
        return []
    return nodes


def _build_document(build: Build) -> dict[str, Any]:
    found = {"digest": build.digest, "resolved": build.resolved}
    keys = ("serving_since", "ray", "vllm")
    return found | {key: value for key in keys if (value := getattr(build, key))}


def document(lock: Lock) -> dict[str, Any]:
    image: dict[str, Any] = {
        "reference": lock.reference,
        "current": _build_document(lock.current()) | {"trial": lock.trial},
    }
    if lock.previous is not None:
        image["previous"] = _build_document(lock.previous)
    if lock.rejected:
        image["rejected"] = [asdict(r) for r in lock.rejected]
    return {
        "format": FORMAT,
        "head": lock.head,
        "image": image,
        "members": [asdict(m) for m in lock.members],
        "left": [asdict(d) for d in lock.left],
    }


def write(path: Path, lock: Lock) -> None:
    """Write the lock atomically: a temporary file in the same folder, then `rename`."""
    text = json.dumps(document(lock), indent=1, sort_keys=True) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, partial = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(partial, 0o644)
        os.replace(partial, path)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise


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
