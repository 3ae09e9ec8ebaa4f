"""Every file the deploy reads on a node, fetched in one command per node and run.

pyinfra 3 does not cache facts: each `host.get_fact` is a round trip. The roles therefore read
facts through `cached()`, and all the plain files they need (the ones they manage, and the few they
decide from: /etc/os-release, /etc/passwd, /etc/group, the SSH host key, the cluster user's podman
storage index) through one TextFiles fact whose paths are listed here, in one place.
"""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass
from typing import Any

from pyinfra.context import ctx_state

from halo_cluster import toolbox
from halo_cluster.facts import OsRelease, TextFile, TextFiles

GRUB = "/etc/default/grub"
KERNEL_CMDLINE = "/etc/kernel/cmdline"
GRUBENV = "/boot/grub2/grubenv"
PROC_CMDLINE = "/proc/cmdline"
ENTRIES = "/boot/loader/entries"
CONNECTIONS = "/etc/NetworkManager/system-connections"
THUNDERBOLT_MODULES = "/etc/modules-load.d/thunderbolt-net.conf"
RDMA_MODULES = "/etc/modules-load.d/halo-rdma.conf"
MEMLOCK_LIMITS = "/etc/security/limits.d/90-halo-memlock.conf"
MEMLOCK_DROP_INS = (
    "/etc/systemd/system.conf.d/90-halo-memlock-default.conf",
    "/etc/systemd/user.conf.d/90-halo-memlock-default.conf",
)
ENV_FILE = "/etc/halo-cluster/cluster.env"
PROFILE = "/etc/profile.d/halo-cluster.sh"
HOST_KEY = "/etc/ssh/ssh_host_ed25519_key.pub"
SYSTEM_FILES = ("/etc/os-release", "/etc/passwd", "/etc/group")
STORAGE = ".local/share/containers/storage"


def keyfile(data: Any) -> str:
    return f"{CONNECTIONS}/{data.halo_nm_connection}.nmconnection"


def user_paths(user: str, toolbox_name: str) -> tuple[str, ...]:
    """Files in the cluster user's home, as `~user/...` (the node's shell expands them)."""
    home = f"~{user}"
    return (
        f"{home}/.ssh/id_ed25519.pub",
        f"{home}/.ssh/authorized_keys",
        f"{home}/.ssh/known_hosts",
        f"{home}/{toolbox.state_file(toolbox_name)}",
        f"{home}/{STORAGE}/*-images/images.json",
        f"{home}/{STORAGE}/*-containers/containers.json",
        f"/var/lib/systemd/linger/{user}",
    )


def paths(data: Any) -> tuple[str, ...]:
    return (
        *SYSTEM_FILES,
        GRUB,
        KERNEL_CMDLINE,
        PROC_CMDLINE,
        GRUBENV,
        f"{ENTRIES}/*.conf",
        keyfile(data),
        THUNDERBOLT_MODULES,
        RDMA_MODULES,
        MEMLOCK_LIMITS,
        *MEMLOCK_DROP_INS,
        ENV_FILE,
        PROFILE,
        HOST_KEY,
        *user_paths(data.halo_cluster_user, data.halo_toolbox),
    )


_CACHES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def cached(host: Any, fact: type, **kwargs: Any) -> Any:
    """`host.get_fact(fact, **kwargs)`, read once per host and run (the state before changes)."""
    cache = _CACHES.setdefault(ctx_state.get(), {})
    key = (host.name, fact.__name__, tuple(sorted((k, repr(v)) for k, v in kwargs.items())))
    if key not in cache:
        cache[key] = host.get_fact(fact, **kwargs)
    return cache[key]


@dataclass(frozen=True)
class NodeFiles:
    files: dict[str, TextFile]

    def text(self, path: str) -> str | None:
        return self.files[path].text if path in self.files else None

    def mode(self, path: str) -> str | None:
        return self.files[path].mode if path in self.files else None

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

    def groups(self) -> dict[str, list[str]]:
        """{group: members} from /etc/group (primary groups are not listed as members)."""
        result = {}
        for line in (self.text("/etc/group") or "").splitlines():
            fields = line.split(":")
            if len(fields) >= 4:
                result[fields[0]] = [m for m in fields[3].split(",") if m]
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


def node_files(host: Any) -> NodeFiles:
    return NodeFiles(cached(host, TextFiles, paths=paths(host.data)))
