"""Prometheus' and Grafana's images in the cluster's lock (halo-cluster.lock: `metrics.image` and
`metrics.grafana_image`, lock.Pin), as the cluster's own image is (halo_cluster/node/image.py):
a tag is resolved on the head once and recorded with its reference; later runs take the lock's
digest while the key names the same tag, so the tag moving upstream moves nothing, and a new tag
is resolved again. A reference with a digest is run as written and recorded nowhere.

The quadlet's comment (`# image: REFERENCE resolved to DIGEST`) stays the head's own record: a
checkout whose lock has no pin for the tag (a lock an older version wrote, a new checkout)
adopts the head's digest from it rather than resolving the tag again, written while the run is
planned (no node changes, so drift stays 0), as the container role adopts the head's history.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyinfra import host, logger
from pyinfra.api import FunctionCommand, operation

from halo_cluster.config import lock as locks
from halo_cluster.config.rules import image_digest
from halo_cluster.node.pyinfra_internals import dry_run

WRITTEN = "written"  # the key names a digest
LOCKED = "locked"  # the lock's pin for the same tag
HEAD = "head"  # the quadlet's record on the head, for the same tag: adopted into the lock
RESOLVED = "resolved"  # the head's resolve in this run: recorded when the run runs


@dataclass(frozen=True)
class Found:
    image: str  # NAME@sha256:... the container runs
    source: str  # where its digest came from: WRITTEN, LOCKED, HEAD or RESOLVED


def record(key: str, reference: str, found: Found, whose: str) -> None:
    """Put what the head runs for `key` in the lock, when the lock does not hold it yet."""
    if found.source in (WRITTEN, LOCKED):
        return
    lock = host.data.halo_container_lock
    digest = image_digest(found.image) or ""
    if found.source == HEAD:
        # no lock yet (the container role writes it when this run runs), or a dry run, which
        # writes nothing: the next deploy adopts it
        if dry_run() or not _adopted(Path(lock), key, locks.Pin(reference, digest)):
            logger.info(f"{host.print_prefix}{key}: the next deploy records {found.image}")
            return
        logger.info(f"{host.print_prefix}{key}: {found.image} adopted from the head into {lock}")
        return
    record_pin(
        name=f"Record {whose} {digest} in {lock}",
        lock=lock,
        key=key,
        reference=reference,
        digest=digest,
    )


@operation(is_idempotent=False)
def record_pin(lock: str, key: str, reference: str, digest: str):
    """
    Record the digest an image key's tag was resolved to in the lock on the controller
    (atomically): the lock as it is when the operation runs, its pin for ``key`` replaced.

    + lock: the lock's path on the controller
    + key: the image's key in cluster.yml
    + reference: the tag the key names
    + digest: what the head resolved it to

    **Example:**

    .. code:: python

        record_pin(name="Record Prometheus' digest", lock="/srv/halo/halo-cluster.lock",
                   key="metrics.image", reference="quay.io/prometheus/prometheus:v3.5.0",
                   digest="sha256:...")
    """
    yield FunctionCommand(_record_pin, (lock, key, reference, digest), {})


def _pinned(found: locks.Lock | None, key: str, pin: locks.Pin) -> locks.Lock | None:
    """The lock as it is now with `key` pinned (None: no lock to pin in)."""
    return None if found is None else found.pin(key, pin)


def _adopted(path: Path, key: str, pin: locks.Pin) -> bool:
    """Whether the head's pin went into the lock (not when there is none, or an unreadable one,
    which the config's load already refused)."""
    return locks.update(path, lambda found: _pinned(found, key, pin))[0] is not None


def _record_pin(state, host, lock: str, key: str, reference: str, digest: str) -> bool:
    pin = locks.Pin(reference, digest, locks.now())
    written, problems = locks.update(Path(lock), lambda found: _pinned(found, key, pin))
    if written is None:
        said = "; ".join(problems) or "no lock"
        logger.error(f"{host.print_prefix}{lock}: {key} not recorded: {said}")
        return False
    logger.info(f"{host.print_prefix}{key}: {reference} is {digest} (recorded in {lock})")
    return True
