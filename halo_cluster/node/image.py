"""The cluster's one image, as every node's roles see it in a run: the lock's digest; before
the lock records one, the digest the head's history says it runs (a new checkout adopts it), or
else the head's resolve of cluster.yml's `image` (skopeo, as the cluster user: their
registries.conf mirrors and credentials); the same for every node, from the head's one read.

The container role pulls and records it, the serve role runs it and checks what each container
runs (`ContainerImages`), `halo-cluster status` shows it: all read it here."""

from __future__ import annotations

import json
import posixpath
import shlex
from dataclasses import dataclass, replace
from typing import Any, TypedDict

from pyinfra.api import FactBase

from halo_cluster.config.lock import DIGEST, HISTORY, LOCK_FILE
from halo_cluster.config.rules import image_name
from halo_cluster.node.facts import as_user
from halo_cluster.node.nodefiles import node_files
from halo_cluster.node.pyinfra_internals import run
from halo_cluster.node.reads import cached


@dataclass(frozen=True)
class Resolved:
    """The cluster's digest for this run, or the node's refusal line when there is none;
    `adopted`: taken from the head's history (no lock in this checkout); `skopeo_missing`: the
    head has no skopeo yet (a fresh head: the packages role installs it in this same run)."""

    digest: str | None
    error: str
    adopted: bool = False
    skopeo_missing: bool = False


@dataclass(frozen=True)
class Recorded:
    """What the head's history says it runs: the last `resolved` line's digest, its time, the
    reference it was resolved from and the Ray and vLLM versions in it ("" each without a
    history)."""

    digest: str = ""
    reference: str = ""
    time: str = ""
    ray: str = ""
    vllm: str = ""


# the new head's line after the history it was carried (roles/container: the head moved)
MOVED_HEAD = "moved-head"


class HeadHistory(FactBase[Recorded]):
    """The last `resolved` (not a candidate) or `switched` line of the head's history
    (docs/roles/container.md): what the head runs whichever checkout deployed or upgraded it."""

    @staticmethod
    def default() -> Recorded:
        return Recorded()

    def command(self, user: str) -> str:
        return moves_command(f"~{shlex.quote(user)}/{HISTORY}")

    def process(self, output: list[str]) -> Recorded:
        found = Recorded()
        for line in output:
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line torn by a full disk: the ones before it still count
            digest = _runs(event) if isinstance(event, dict) else ""
            if DIGEST.fullmatch(digest):
                fields = ("reference", "time", "ray", "vllm")
                found = Recorded(digest, *(str(event.get(k, "")) for k in fields))
        return found


def moves_command(path: str) -> str:
    """The last line of the history at `path` (a shell word) that moves the cluster: by its
    event, not a fixed tail, since every upgrade appends a candidate `resolved` (a no-op one
    too) and the bench and the membership their own lines, which would push the last move out
    of any tail. `process` still skips what the filter lets through (a torn line)."""
    moves = f"""grep -E '"event": ?"(resolved|switched|{MOVED_HEAD})"'"""
    candidates = """grep -Ev '"candidate": ?true'"""
    return f"{moves} {path} 2>/dev/null | {candidates} | tail -n 1"


def _runs(event: dict) -> str:
    """The digest a line says the head runs from then on ("" for a line that says none): a
    deploy's resolve, a head move's (the new head's first line), or an upgrade's or rollback's
    switch; an upgrade's resolve of its candidate (`candidate`) moves nothing until it
    switches."""
    if event.get("event") in ("resolved", MOVED_HEAD) and not event.get("candidate"):
        return str(event.get("digest", ""))
    return str(event.get("to", "")) if event.get("event") == "switched" else ""


class ResolvedImage(FactBase[Resolved]):
    """The digest of the top-level manifest `reference` names in its registry now, by skopeo
    (its `Digest`: `skopeo inspect`'s own, never a registry's API read by hand)."""

    @staticmethod
    def default() -> Resolved:
        return Resolved(
            None, "skopeo is not installed on the head (the packages role installs it)", False, True
        )

    def requires_command(self, user: str, reference: str) -> str:
        return "skopeo"

    def command(self, user: str, reference: str) -> str:
        inspect = "skopeo inspect --no-tags --format '{{.Digest}}' " + shlex.quote(
            f"docker://{reference}"
        )
        # before the first deploy made the user, it has no registries.conf or credentials of its
        # own: the system's (the same mirrors) answer, as root
        return (
            f"if id -u {shlex.quote(user)} >/dev/null 2>&1; then {as_user(user, inspect)} 2>&1; "
            f"else {inspect} 2>&1; fi || true"
        )

    def process(self, output: list[str]) -> Resolved:
        lines = [line.strip() for line in output if line.strip()]
        # warnings come first (a user without a session yet: no XDG_RUNTIME_DIR), the digest last
        if lines and DIGEST.fullmatch(lines[-1]):
            return Resolved(lines[-1], "")
        return Resolved(None, lines[-1] if lines else "skopeo printed nothing")


# Ray's and vLLM's versions inside an image, read from their dist-info by the Python that runs
# `vllm` (importing vllm would load torch): printed as "RAY VLLM", `none` for one not installed
# (vLLM's wheel requires no Ray since 0.18: an image for `serve.launcher: native` may have none)
VERSIONS = (
    '. /etc/profile >/dev/null 2>&1; py=$(sed -n "1s/^#!//p" "$(command -v vllm)"); '
    '"$py" -c "import importlib.metadata as m; print(*[([d.version for d in '
    "m.distributions(name=n)] + ['none'])[0] for n in ('ray', 'vllm')])\""
)


def versions_command(user: str, image: str) -> str:
    run = f"podman run --rm --entrypoint sh {shlex.quote(image)} -c {shlex.quote(VERSIONS)}"
    return f"{as_user(user, run)} 2>/dev/null"


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


def reads(data: Any) -> tuple[tuple[type, dict], ...]:
    """The head's reads of the image: its history always (it checks the lock), the registry
    only while the lock records no digest."""
    history = (HeadHistory, {"user": data.halo_cluster_user})
    return (history,) if data.halo_container_digest else (history, read(data))


def history_append(user: str, line: str) -> str:
    """The cluster user's shell command appending one line to the head's history (the container
    role's `resolved`, the serve role's `member-left`, the upgrade's lines)."""
    append = (
        f'mkdir -p "$HOME/{posixpath.dirname(HISTORY)}" && '
        f"printf '%s\\n' {shlex.quote(line)} >> \"$HOME/{HISTORY}\""
    )
    return as_user(user, f"sh -c {shlex.quote(append)}")


def head_host() -> Any:
    return next(h for h in run().inventory if h.data.get("halo_role") == "head")


def recorded(host: Any) -> Recorded:
    """What the head's history says it runs (read in the head's one command); while the head
    moves, the old head's (its snapshot holds the history the deploy carries), or nothing when
    the old head is no node of this run (its history is out of reach)."""
    head = head_host()
    user = head.data.halo_cluster_user
    moved_from = head.data.halo_container_moved_from
    if not moved_from:
        return cached(head, HeadHistory, user=user)
    old = old_head(moved_from)
    return HeadHistory().process(old_history(old, user).splitlines()) if old else Recorded()


def old_head(name: str) -> Any:
    """The node that was the head (the lock's `head`) while the head moves, None when it is not
    a node of this run."""
    return next((h for h in run().inventory if h.data.get("halo_node") == name), None)


def old_history(old: Any, user: str) -> str:
    """The old head's history as its snapshot read it ("" without one): the roles declare it
    there while the head moves (roles/container)."""
    return node_files(old).user_file(user, HISTORY) or ""


def resolved(host: Any) -> Resolved:
    """The cluster's digest for this run (read on the head, in its one command; a worker waits
    for that read): the lock's, when the head's history agrees; else the history's, for the
    same reference; else the head's resolve."""
    head = head_host()
    data = head.data
    history = recorded(host)
    digest, image = host.data.halo_container_digest, host.data.halo_image
    if digest and history.digest and history.digest != digest:
        return Resolved(
            None,
            f"head: runs {history.digest} since {history.time}, {LOCK_FILE} says {digest} "
            f"(deployed from another checkout?): copy that checkout's {LOCK_FILE} to "
            f"{data.halo_container_lock}",
        )
    if digest:
        return Resolved(digest, "")
    if history.digest and history.reference == image:
        return Resolved(history.digest, "", adopted=True)
    fact, kwargs = read(data)
    found = cached(head, fact, **kwargs)
    if found.skopeo_missing:
        # the reads run before any role, so a fresh head always lacks it on its first run: the
        # line says so, and `halo-cluster deploy` runs once more by itself (report.SKOPEO_PENDING)
        return replace(
            found,
            error=f"image: skopeo is not installed on the head ({data.halo_node}) yet: the "
            f"packages role installs it in this run, the next run resolves {image}",
        )
    where = "here" if host.name == head.name else "on the head"
    error = (
        f"image: {image} could not be resolved to a digest {where} "
        f"(skopeo inspect as {data.halo_cluster_user}): {found.error}"
    )
    return found if found.digest else Resolved(None, error)


def pinned(host: Any) -> str | None:
    """`NAME@sha256:...` every node runs, None when the head could not resolve it; the lock's
    own pin for the lock's digest (its reference's name, which `image` may no longer be)."""
    found = resolved(host)
    if not found.digest:
        return None
    if found.digest == host.data.halo_container_digest and host.data.halo_container_pinned:
        return host.data.halo_container_pinned
    return f"{image_name(host.data.halo_image)}@{found.digest}"
