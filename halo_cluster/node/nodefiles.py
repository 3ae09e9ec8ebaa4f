"""Every file the deploy reads on a node, fetched in one command per node and run.

pyinfra 3 does not cache facts: each `host.get_fact` is a round trip. The roles therefore read
facts through `cached()` (node/reads.py: every declared fact of a node in one command), and all
the plain files they need through one TextFiles fact among them: the snapshot. Its paths are the
union of what each role declares next to its code (`paths(data)` in the role's package), handed
in by deploy.py (`declare`); `text_file` refuses to write a path no role declared, so a
forgotten declaration fails every plan test instead of re-uploading the file on every run.
"""

from __future__ import annotations

import fnmatch
import json
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from halo_cluster.node.facts import OsRelease, TextFile, TextFiles
from halo_cluster.node.pyinfra_internals import run
from halo_cluster.node.reads import cached

__all__ = ["cached", "declare", "node_files", "snapshot_read"]

# read by the deploy itself (safety checks, homes, groups), whatever the roles declare
SYSTEM_FILES = ("/etc/os-release", "/etc/passwd", "/etc/group")
STORAGE = ".local/share/containers/storage"


_DECLARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def declare(declared_paths: Callable[[Any], tuple[str, ...]]) -> None:
    """What the roles read or write, as a function of host data, for this run: the deploy hands
    it in (roles build on this package, never the other way round)."""
    _DECLARED[run()] = declared_paths


def paths(data: Any) -> tuple[str, ...]:
    """The snapshot: the system files plus every path the roles declare for this run."""
    declared = _DECLARED.get(run())
    return (*SYSTEM_FILES, *(declared(data) if declared else ()))


class UndeclaredPath(Exception):
    """A role writes a file that no role declares: it would be rewritten on every run."""


@dataclass(frozen=True)
class NodeFiles:
    files: dict[str, TextFile]
    declared: tuple[str, ...] = ()

    def current(self, path: str) -> TextFile | None:
        """The file as the run found it; refuses a path outside the snapshot."""
        if not any(fnmatch.fnmatchcase(path, self._expand(p)) for p in self.declared):
            raise UndeclaredPath(f"{path} is in no role's paths(): declare it next to the role")
        return self.files.get(path)

    def differs(self, path: str, text: str, mode: str) -> bool:
        """Whether `path` must be written to hold `text` with `mode` (missing counts)."""
        present = self.current(path)
        return present is None or present.text != text or present.mode != mode

    def _expand(self, pattern: str) -> str:
        """`~user/...` as the node's shell expands it (/home/user when the user is new)."""
        if not pattern.startswith("~"):
            return pattern
        user, _, rest = pattern[1:].partition("/")
        return f"{self.home(user) or f'/home/{user}'}/{rest}"

    def text(self, path: str) -> str | None:
        return self.files[path].text if path in self.files else None

    def exists(self, path: str) -> bool:
        return path in self.files

    def under(self, folder: str) -> dict[str, str]:
        return {p: f.text for p, f in self.files.items() if p.startswith(f"{folder}/")}

    def os_release(self) -> dict[str, str]:
        return OsRelease().process((self.text("/etc/os-release") or "").splitlines())

    def home(self, user: str) -> str | None:
        for line in (self.text("/etc/passwd") or "").splitlines():
            fields = line.split(":")
            if fields[0] == user and len(fields) > 5:
                return fields[5]
        return None

    def user_of_home(self, home: str) -> str | None:
        for line in (self.text("/etc/passwd") or "").splitlines():
            fields = line.split(":")
            if len(fields) > 5 and fields[5] == home:
                return fields[0]
        return None

    def groups(self) -> dict[str, list[str]]:
        """{group: members} from /etc/group (primary groups are not listed as members)."""
        result = {}
        for line in (self.text("/etc/group") or "").splitlines():
            fields = line.split(":")
            if len(fields) >= 4:
                result[fields[0]] = [m for m in fields[3].split(",") if m]
        return result

    def group_ids(self) -> dict[str, int]:
        """{group: gid} from /etc/group."""
        result = {}
        for line in (self.text("/etc/group") or "").splitlines():
            fields = line.split(":")
            if len(fields) >= 4 and fields[2].isdigit():
                result[fields[0]] = int(fields[2])
        return result

    def user_file(self, user: str, relative: str) -> str | None:
        home = self.home(user)
        return self.text(f"{home}/{relative}") if home else None

    def storage_index(self, user: str, kind: str) -> list[dict]:
        """The user's podman storage index: kind "images" or "containers"."""
        home = self.home(user)
        for path, found in self.files.items():
            if home and path.startswith(f"{home}/{STORAGE}/") and path.endswith(f"/{kind}.json"):
                return json.loads(found.text or "[]")
        return []

    def image_id(self, user: str, reference: str) -> str | None:
        """Id of the image `reference` (name[:tag] or name@sha256:...) in the user's storage."""
        if "@" in reference:
            digest = reference.split("@", 1)[1]
            matches = [
                i
                for i in self.storage_index(user, "images")
                if digest == i.get("digest") or digest in (i.get("digests") or [])
            ]
        else:
            tagged = reference if ":" in reference.rsplit("/", 1)[-1] else f"{reference}:latest"
            matches = [
                i for i in self.storage_index(user, "images") if tagged in i.get("names", [])
            ]
        return matches[0]["id"] if matches else None

    def container_image(self, user: str, name: str) -> str | None:
        """Id of the image the user's container `name` was made from."""
        for container in self.storage_index(user, "containers"):
            if name in container.get("names", []):
                return container.get("image")
        return None


def snapshot_read(data: Any) -> tuple[type, dict[str, Any]]:
    """The snapshot as a declared read (`reads.prefetch`): TextFiles of every path."""
    return TextFiles, {"paths": paths(data)}


def node_files(host: Any) -> NodeFiles:
    fact, kwargs = snapshot_read(host.data)
    return NodeFiles(cached(host, fact, **kwargs), kwargs["paths"])
