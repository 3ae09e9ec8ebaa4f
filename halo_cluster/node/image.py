"""The cluster's one image, as every node's roles see it in a run: the lock's digest, or, before
the lock records one, the head's resolve of cluster.yml's `image` (skopeo, as the cluster user:
their registries.conf mirrors and credentials), the same for every node.

The container role pulls and records it, the serve role runs it and checks what each container
runs (`ContainerImages`), `halo-cluster status` shows it: all read it here."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, TypedDict

from pyinfra.api import FactBase
from pyinfra.context import ctx_state

from halo_cluster.config.lock import DIGEST
from halo_cluster.config.rules import image_name
from halo_cluster.node.facts import as_user
from halo_cluster.node.reads import cached


@dataclass(frozen=True)
class Resolved:
    """What the registry says the reference is now: its digest, or why it could not say."""

    digest: str | None
    error: str


class ResolvedImage(FactBase[Resolved]):
    """The digest of the top-level manifest `reference` names in its registry now, by skopeo
    (its `Digest`: `skopeo inspect`'s own, never a registry's API read by hand)."""

    @staticmethod
    def default() -> Resolved:
        return Resolved(None, "skopeo is not installed on the head (the packages role installs it)")

    def requires_command(self, user: str, reference: str) -> str:
        return "skopeo"

    def command(self, user: str, reference: str) -> str:
        inspect = "skopeo inspect --no-tags --format '{{.Digest}}' " + shlex.quote(
            f"docker://{reference}"
        )
        return f"{as_user(user, inspect)} 2>&1 || true"

    def process(self, output: list[str]) -> Resolved:
        lines = [line.strip() for line in output if line.strip()]
        if len(lines) == 1 and DIGEST.fullmatch(lines[0]):
            return Resolved(lines[0], "")
        return Resolved(None, lines[-1] if lines else "skopeo printed nothing")


IMAGES_FORMAT = "{{.Name}} {{.ImageName}} {{.Image}}"


class ContainerImage(TypedDict):
    reference: str  # ImageName: the reference the container was made from (`NAME@sha256:...`)
    id: str  # Image: the local id of that image


class ContainerImages(FactBase[dict[str, ContainerImage]]):
    """The image each of the user's containers runs, by container name; a container that does
    not exist (its service stopped: the quadlets remove it) is absent."""

    @staticmethod
    def default() -> dict[str, ContainerImage]:
        return {}

    def command(self, user: str, containers: tuple[str, ...]) -> str:
        names = " ".join(shlex.quote(c) for c in containers)
        inspect = f"podman container inspect --format {shlex.quote(IMAGES_FORMAT)} {names}"
        return f"{as_user(user, inspect)} 2>/dev/null || true"

    def process(self, output: list[str]) -> dict[str, ContainerImage]:
        found = {}
        for line in output:
            parts = line.split()
            if len(parts) == 3:
                found[parts[0]] = ContainerImage(reference=parts[1], id=parts[2])
        return found


def parse_images(output: list[str]) -> dict[str, ContainerImage]:
    """{container: its image} from the lines `IMAGES_FORMAT` prints."""
    return ContainerImages().process(output)


def read(data: Any) -> tuple[type, dict]:
    return ResolvedImage, {"user": data.halo_cluster_user, "reference": data.halo_image}


def head_host() -> Any:
    state = ctx_state.get()
    return next(h for h in state.inventory if h.data.get("halo_role") == "head")


def resolved(host: Any) -> Resolved:
    """The cluster's digest for this run: the lock's, else the head's resolve (read once, on the
    head, in its one command; a worker waits for that read)."""
    if host.data.halo_container_digest:
        return Resolved(host.data.halo_container_digest, "")
    head = head_host()
    fact, kwargs = read(head.data)
    return cached(head, fact, **kwargs)


def pinned(host: Any) -> str | None:
    """`NAME@sha256:...` every node runs, None when the head could not resolve it."""
    found = resolved(host)
    return f"{image_name(host.data.halo_image)}@{found.digest}" if found.digest else None
