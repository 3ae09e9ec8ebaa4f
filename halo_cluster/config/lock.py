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
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

LOCK_FILE = "halo-cluster.lock"
FORMAT = 1
HISTORY = ".local/state/halo-cluster/history.jsonl"  # below the cluster user's home, on the head
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


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
    """What the lock says; `digest` is "" before the first resolve recorded one."""

    head: str
    reference: str
    digest: str
    resolved: str = ""
    ray: str = ""
    vllm: str = ""
    members: tuple[Member, ...] = ()  # the nodes the lock was last written for, in order
    left: tuple[Departed, ...] = ()  # nodes removed from cluster.yml since: probed by the head


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
    text = {key: str(current.get(key) or "") for key in ("resolved", "ray", "vllm")}
    members = _nodes(path, doc, "members", problems)
    left = _nodes(path, doc, "left", problems)
    if problems:
        return None, problems
    return Lock(
        doc["head"],
        image["reference"],
        current["digest"],
        **text,
        members=tuple(Member(n["name"], n["data_address"]) for n in members),
        left=tuple(Departed(n["name"], n["data_address"], str(n.get("since", ""))) for n in left),
    ), []


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


def document(lock: Lock) -> dict[str, Any]:
    current = {"digest": lock.digest, "resolved": lock.resolved, "trial": False}
    current |= {key: value for key in ("ray", "vllm") if (value := getattr(lock, key))}
    return {
        "format": FORMAT,
        "head": lock.head,
        "image": {"reference": lock.reference, "current": current},
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
