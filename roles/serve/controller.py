"""What a deploy writes on the controller for the cluster's membership, when its operations run
and only then: Ray's token (the tool's own, `serve.ray_token_file` unset), made by the first
deploy and rotated by the deploy that takes a node out, and the lock's members and `left`
(halo-cluster.lock in the state folder). Loading cluster.yml writes neither: `where`, `drift`,
`status`, `verify` and `bench` load it too, and a dry run stops before any operation runs.

While the deploy is planned, every node is given the token the run will write (`ray_token`),
one per run: a dry run shows the change a deploy makes. The head writes it before the lock
records the node that left, so that a run stopped between the two rotates the token again
rather than never."""

from __future__ import annotations

import os
import secrets
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from pyinfra import host, logger
from pyinfra.api import FunctionCommand, operation

from halo_cluster.config import lock as locks

_NEW: dict[str, str] = {}  # the token this run writes, by its file's path


def token_due(data: Any) -> str:
    """Why this run writes Ray's token ("" when it does not): the tool's own token, made when
    there is none yet and the cluster serves on Ray, rotated when a node leaves the cluster in this
    run unless it serves natively, without one (a token file the user gave is never written)."""
    if not data.halo_serve_ray_token_owned:
        return ""
    if not Path(data.halo_serve_ray_token_file).exists():
        return "made" if data.halo_serve_ray_listens else ""  # serving on Ray
    leaving = data.halo_container_leaving
    ray = data.halo_serve_launcher == "ray"
    return f"rotated: {', '.join(leaving)} left" if leaving and ray else ""


def ray_token(data: Any) -> str:
    """The token line this run gives the nodes: the one it writes, else the file's."""
    path = data.halo_serve_ray_token_file
    if token_due(data):
        return _NEW.setdefault(path, secrets.token_hex(32) + "\n")
    return Path(path).read_text().strip() + "\n"


def record() -> None:
    """On the head: the token, then the members, each when this run changes it."""
    data = host.data
    if data.halo_role != "head":
        return
    if why := token_due(data):
        write_ray_token(
            name=f"Ray's token in {data.halo_serve_ray_token_file} ({why})",
            path=data.halo_serve_ray_token_file,
        )
    if data.halo_container_unrecorded:
        record_members(
            name=f"Record the members in {data.halo_container_lock}",
            lock=data.halo_container_lock,
            members=data.halo_container_members,
        )


@operation(is_idempotent=False)
def write_ray_token(path: str):
    """
    Write Ray's cluster token on the controller: the one this run gave the nodes, 64 random
    hex digits, 0600 in a 0700 folder, atomically.

    + path: the token file, ``.halo-cluster/ray-token`` beside cluster.yml

    **Example:**

    .. code:: python

        write_ray_token(name="Ray's token", path="/srv/halo/.halo-cluster/ray-token")
    """
    yield FunctionCommand(_write_token, (path,), {})


def _write_token(state, host, path: str) -> bool:
    make_token(Path(path), _NEW.setdefault(path, secrets.token_hex(32) + "\n"))
    return True


def make_token(path: Path, text: str) -> None:
    """`text` as the token file: 0600 (mkstemp's mode) in a 0700 folder, then `rename`. The
    folder is the state folder, which a read-only command may have made for its reports."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    descriptor, partial = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w") as token:
            token.write(text)
        os.replace(partial, path)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise


@operation(is_idempotent=False)
def record_members(lock: str, members: dict[str, str]):
    """
    Record the cluster's members in the lock on the controller (atomically): the lock as it
    is when the operation runs, a node the config no longer names moved to ``left``, one named
    again taken out of it.

    + lock: the lock's path on the controller
    + members: the config's nodes, {name: data address}

    **Example:**

    .. code:: python

        record_members(name="Record the members", lock="/srv/halo/halo-cluster.lock",
                       members={"node1": "192.168.100.1", "node2": "192.168.100.2"})
    """
    yield FunctionCommand(_record_members, (lock, members), {})


def _record_members(state, host, lock: str, members: dict[str, str]) -> bool:
    nodes = locks.members_of(members)
    leaving: list[str] = []

    def recorded(found: locks.Lock | None) -> locks.Lock | None:
        if found is None:
            return None
        left, leaving[:] = locks.moved(found, nodes)
        return replace(found, members=nodes, left=left)

    written, problems = locks.update(Path(lock), recorded)
    if written is None:
        logger.error(
            f"{host.print_prefix}{lock}: members not recorded: {'; '.join(problems) or 'no lock'}"
        )
        return False
    said = f": {', '.join(leaving)} left" if leaving else ""
    logger.info(f"{host.print_prefix}members recorded in {lock}{said}")
    return True
