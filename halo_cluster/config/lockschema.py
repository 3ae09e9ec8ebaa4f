"""The shape of `halo-cluster.lock` (halo_cluster/config/lock.py), and its safe reading.

The lock is read before any host is contacted, and a lock is only a file in a folder: it may be a
FIFO, a device, a symlink out of the folder, 20 MB of padding, JSON nested 100,000 levels deep,
or hold a hostile name. So the file is looked at before it is opened (a regular file, or a
symlink to one inside the config's folder, of bounded size), opened without blocking, read in
bounded memory, its nesting bounded before the JSON parser recurses, a key given twice refused,
and then every key, type and bound checked: names by the config's node-name rule, addresses as
IPv4, digests by the OCI rule, times as RFC 3339 UTC, no unknown key at any level. Every problem
is one line, `PATH: KEY: what is wrong (the fix)`, its value quoted by `quoting.quote`.

Keys added after format 1 was first written are optional (`members`, `left`, `metrics`): a lock
an older version wrote still reads, and the next deploy adds them.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from halo_cluster.config import quoting, rules
from halo_cluster.config.quoting import quote

FORMAT = 1
MAX_BYTES = 1024 * 1024  # a lock is a few KiB
MAX_DEPTH = 8  # the lock needs 4 (image.rejected[].reason)
MAX_MEMBERS = 256  # far beyond any cluster of these machines
MAX_LEFT = 256
MAX_REJECTED = 256
MAX_REASON = 500
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z", re.ASCII)
# a Ray or vLLM version as the image reports it (PEP 440 with a local part): one printable
# ASCII word
VERSION = re.compile(r"[!-~]{1,64}", re.ASCII)
# a string outside the JSON text's structure: its brackets do not nest
_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)  # possessive: linear on any text
_BRACKETS = re.compile(r"[\[\]{}]")
Check = Callable[[object], str | None]  # what is wrong with a value, with its fix, or None
RESTORE = "restore the lock from git or from the checkout that deployed"


@dataclass(frozen=True)
class Key:
    """One key of an object: its check (a function, an object's keys, or a list of objects)."""

    check: Check | dict[str, Key] | Items
    required: bool = False


@dataclass(frozen=True)
class Items:
    """A list of objects of these keys, at most `most` of them."""

    keys: dict[str, Key]
    most: int


def format_number(value: object) -> str | None:
    if type(value) is int and value == FORMAT:  # not True: True == 1 in Python
        return None
    what = f"{quote(value)} is not the integer {FORMAT}"
    return f"{what} (the lock format this tool reads: a newer halo-cluster wrote it?)"


def data_address(value: object) -> str | None:
    try:
        canonical = isinstance(value, str) and str(ipaddress.IPv4Address(value)) == value
    except ValueError:
        canonical = False
    return None if canonical else f"{quote(value)} is not an IPv4 address (a node's data address)"


def digest(value: object) -> str | None:
    if not isinstance(value, str):
        return f"{quote(value)} is not a digest (sha256:<64 hex digits>)"
    return rules.image_digest_problem(value)


def reference(value: object) -> str | None:
    if not isinstance(value, str):
        return f"{quote(value)} is not an image reference (cluster.yml's image, as written)"
    return rules.image_reference(value)


def time(value: object) -> str | None:
    """RFC 3339 in UTC to the second, as the tool writes it (`lock.now`), of a real date."""
    fix = "(a UTC time as 2026-01-31T12:00:00Z)"
    if not isinstance(value, str) or not TIME.fullmatch(value):
        return f"{quote(value)} is not a UTC time {fix}"
    try:
        datetime.strptime(value, TIME_FORMAT)
    except ValueError:
        return f"{quote(value)} is not a real date and time {fix}"
    return None


def version(value: object) -> str | None:
    if isinstance(value, str) and VERSION.fullmatch(value):
        return None
    return f"{quote(value)} is not a version (one printable ASCII word, at most 64 characters)"


def boolean(value: object) -> str | None:
    return None if isinstance(value, bool) else f"{quote(value)} is not true or false (JSON)"


reason = rules.line(MAX_REASON, least=1)


# a build's keys: `current`'s and `previous`'s
BUILD: dict[str, Key] = {
    "digest": Key(digest, required=True),
    "resolved": Key(time),
    "serving_since": Key(time),
    "ray": Key(version),
    "vllm": Key(version),
}
# an image beside the cluster's own, pinned: the tag cluster.yml names and the digest it was
# resolved to once (lock.Pin)
PIN: dict[str, Key] = {
    "reference": Key(reference, required=True),
    "digest": Key(digest, required=True),
    "resolved": Key(time),
}
# those images by their key in cluster.yml, nested as there (`metrics.image`): the one place that
# says which keys the lock may pin
PINNED: dict[str, tuple[str, ...]] = {"metrics": ("image", "grafana_image")}
SHAPE: dict[str, Key] = {
    "format": Key(format_number, required=True),
    "head": Key(rules.node_name, required=True),
    "image": Key(
        {
            "reference": Key(reference, required=True),
            "current": Key({**BUILD, "trial": Key(boolean)}, required=True),
            "previous": Key(BUILD),
            "rejected": Key(
                Items(
                    {
                        "digest": Key(digest, required=True),
                        "at": Key(time, required=True),
                        "reason": Key(reason, required=True),
                    },
                    MAX_REJECTED,
                )
            ),
        },
        required=True,
    ),
    # absent in a lock written before the members were recorded
    "members": Key(
        Items(
            {
                "name": Key(rules.node_name, required=True),
                "data_address": Key(data_address, required=True),
            },
            MAX_MEMBERS,
        )
    ),
    "left": Key(
        Items(
            {
                "name": Key(rules.node_name, required=True),
                "data_address": Key(data_address, required=True),
                "since": Key(time, required=True),
            },
            MAX_LEFT,
        )
    ),
    # absent in a lock written before these images were pinned in it
    **{section: Key({name: Key(PIN) for name in names}) for section, names in PINNED.items()},
}


class Refused(Exception):
    """The lock's problems, one line each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def load(path: Path) -> dict[str, Any] | None:
    """The lock's checked document, None when there is no lock; raises Refused."""
    text = _text(path)
    if text is None:
        return None
    doc = _json(path, text)
    problems = check(path, doc)
    if problems:
        raise Refused(problems)
    return doc


def check(path: Path, doc: Any) -> list[str]:
    """Every problem of a parsed lock document, one line each."""
    if not isinstance(doc, dict):
        return [_line(path, "", f"{quote(doc)} is not a JSON object ({RESTORE})")]
    if problem := format_number(doc.get("format")):  # another format: its keys are not ours
        return [_line(path, "format", problem)]
    problems: list[str] = []
    _keys(path, doc, SHAPE, "", problems)
    if problems:
        return problems
    image = doc["image"]
    if "previous" in image and image["previous"]["digest"] == image["current"]["digest"]:
        what = "is image.current.digest (a rollback to it goes nowhere: remove image.previous)"
        problems.append(_line(path, "image.previous.digest", what))
    for key in ("members", "left"):
        names = [n["name"] for n in doc.get(key, ())]
        if len(set(names)) != len(names):
            problems.append(_line(path, key, "names a node twice (one entry per node)"))
    members = [n["name"] for n in doc.get("members", ())]
    if members and doc["head"] not in members:  # each deploy records its head as a member
        what = f"{quote(doc['head'])} is not among the {len(members)} members ({RESTORE})"
        problems.append(_line(path, "head", what))
    return problems


def _keys(path: Path, doc: dict, keys: dict[str, Key], at: str, problems: list[str]) -> None:
    for name in doc:
        if name not in keys:
            problems.append(_line(path, _join(at, name), "unknown key (this tool writes none)"))
    for name, key in keys.items():
        where = _join(at, name)
        if name not in doc:
            if key.required:
                problems.append(_line(path, where, "missing"))
            continue
        _value(path, doc[name], key.check, where, problems)


def _value(path: Path, value: Any, check: Any, at: str, problems: list[str]) -> None:
    if isinstance(check, dict):
        if isinstance(value, dict):
            _keys(path, value, check, at, problems)
        else:
            problems.append(_line(path, at, f"{quote(value)} is not an object"))
    elif isinstance(check, Items):
        if not isinstance(value, list):
            problems.append(_line(path, at, f"{quote(value)} is not a list of objects"))
        elif len(value) > check.most:
            what = f"holds {len(value)} items, more than {check.most} ({RESTORE})"
            problems.append(_line(path, at, what))
        else:
            for i, item in enumerate(value):
                _value(path, item, check.keys, f"{at}[{i}]", problems)
    elif (problem := check(value)) is not None:
        problems.append(_line(path, at, problem))


def _join(at: str, key: str) -> str:
    shown = key if re.fullmatch(r"[a-z_]{1,32}", key) else quote(key)
    return f"{at}.{shown}" if at else shown


def _line(path: Path, key: str, what: str) -> str:
    where = f"{quoting.path(str(path))}: "
    return where + (f"{key}: {what}" if key else what)


def _refused(path: Path, what: str) -> Refused:
    return Refused([_line(path, "", what)])


def _text(path: Path) -> str | None:
    """The lock's text, None when there is none: looked at before it is opened, opened without
    blocking or following a link, read in bounded memory."""
    target = path
    try:
        found = os.lstat(path)
        if stat.S_ISLNK(found.st_mode):
            target = Path(os.path.realpath(path))
            if not target.is_relative_to(os.path.realpath(path.parent)):
                shown = quote(str(target))
                raise _refused(path, f"is a symlink out of its folder, to {shown} ({RESTORE})")
            found = os.stat(target)
    except FileNotFoundError:
        if target == path:
            return None
        raise _refused(path, f"is a symlink to nothing ({RESTORE})") from None
    except OSError as exc:
        raise _refused(path, f"cannot be read ({exc.strerror})") from None
    _regular(path, found)
    try:
        descriptor = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as exc:
        raise _refused(path, f"cannot be read ({exc.strerror})") from None
    with os.fdopen(descriptor, "rb") as stream:
        _regular(path, os.fstat(stream.fileno()))  # it may have been swapped since
        data = stream.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise _refused(path, f"is larger than {MAX_BYTES // 1024} KiB ({RESTORE})")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _refused(path, f"is not UTF-8 text (byte {exc.start + 1}; {RESTORE})") from None


def _regular(path: Path, found: os.stat_result) -> None:
    """A regular file of bounded size (a FIFO would block the read, a device never end it)."""
    if not stat.S_ISREG(found.st_mode):
        raise _refused(path, f"is not a regular file ({RESTORE})")
    if found.st_size > MAX_BYTES:
        raise _refused(path, f"is larger than {MAX_BYTES // 1024} KiB ({RESTORE})")


class _Twice(ValueError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _Twice(key)
        found[key] = value
    return found


def _json(path: Path, text: str) -> Any:
    """The parsed text: its nesting bounded first, since the parser recurses once a level."""
    depth = deepest = 0
    for bracket in _BRACKETS.finditer(_STRING.sub('""', text)):
        depth += 1 if bracket.group() in "[{" else -1
        deepest = max(deepest, depth)
    if deepest > MAX_DEPTH:
        raise _refused(path, f"nests deeper than {MAX_DEPTH} levels ({RESTORE})")
    try:
        return json.loads(text, object_pairs_hook=_pairs)
    except _Twice as twice:
        raise _refused(path, f"the key {quote(twice.args[0])} is given twice (keep one)") from None
    except ValueError as exc:
        raise _refused(path, f"is not JSON ({exc}; {RESTORE})") from None
