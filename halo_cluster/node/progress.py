"""Long waits say what they wait for: a line every few seconds with the time so far; long
transfers (the image's pull, the model's download) say their bytes, rate and time left, read
from the sizes in their storage on the node (docs/architecture.md, "Progress")."""

from __future__ import annotations

import shlex
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pyinfra import logger

from halo_cluster.decide.transfer import Expected, Meter, layers_to_fetch
from halo_cluster.node.facts import as_user
from halo_cluster.node.nodefiles import STORAGE

EVERY_SECONDS = 15.0
READ_SECONDS = 30  # one read of the sizes; a node that does not answer in time skips a line
# where podman stages a pull's blobs (containers.conf's image_copy_tmp_dir, by default)
PULL_STAGING = "/var/tmp/container_images_storage*"
SEPARATOR = "--- in the registry"


@contextmanager
def waiting(host: Any, what: str, every: float = EVERY_SECONDS) -> Iterator[None]:
    """Log `waiting for WHAT: N s so far` every `every` seconds until the block ends.

    pyinfra's CLI patches threads into gevent greenlets, so this ticks while SSH waits.
    """
    stop = threading.Event()
    start = time.monotonic()

    def tick() -> None:
        while not stop.wait(every):
            elapsed = time.monotonic() - start
            logger.info(f"{host.print_prefix}waiting for {what}: {elapsed:.0f} s so far")

    logger.info(f"{host.print_prefix}waiting for {what}")
    with _ticking(tick, stop):
        yield


@dataclass(frozen=True)
class Measure:
    """How a transfer is measured on its node: `expected`, a shell read whose output `expected_from`
    turns into what the transfer brings; `on_disk`, a shell read printing `NAME SIZE` lines of
    what has arrived so far (both run as root, each in at most READ_SECONDS)."""

    expected: str
    expected_from: Callable[[str], Expected]
    on_disk: str


def pull_measure(user: str, image: str) -> Measure:
    """A pull as the user: its layers' sizes from the registry (skopeo, installed with podman)
    less those already stored; the bytes podman stages, per blob, while it fetches them."""
    form = shlex.quote("{{range .LayersData}}{{.Digest}} {{.Size}} {{end}}")
    inspect = f"skopeo inspect --no-tags --format {form} {shlex.quote(f'docker://{image}')}"
    layers = f"~{user}/{STORAGE}/*-layers/layers.json"
    return Measure(
        expected=f"cat {layers}; echo {SEPARATOR}; {as_user(user, inspect)} 2>/dev/null",
        expected_from=_layers_to_fetch,
        on_disk=(
            f"find {PULL_STAGING} -maxdepth 1 -type f -user {shlex.quote(user)} "
            "-printf '%f %s\\n' 2>/dev/null"
        ),
    )


def _layers_to_fetch(output: str) -> Expected:
    stored, _, inspected = output.partition(SEPARATOR)
    return layers_to_fetch(inspected, stored)


@contextmanager
def measuring(
    say: Callable[[str, bool], None],
    run: Callable[[str], str],
    what: str,
    measure: Measure,
    every: float = EVERY_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[None]:
    """Say WHAT's progress every `every` seconds while the block runs: `run(script)` reads the
    node (its stdout), `say(line, warning)` says a line. Both reads run at once, the sizes on
    disk first: what was there before the transfer is not the transfer's."""
    stop = threading.Event()

    def tick() -> None:
        try:
            start, listing = clock(), run(measure.on_disk)
            meter = Meter(measure.expected_from(run(measure.expected)))
            meter.observe(start, listing)
        except Exception:  # a read that failed costs the lines, never the transfer
            return
        while not stop.wait(every):
            try:
                line, stalled = meter.observe(clock(), run(measure.on_disk))
            except Exception:
                continue  # the next read may answer; the transfer's own end says what failed
            if stop.is_set():
                return
            say(f"{what}: {line}", False)
            if stalled:
                say(f"{what}: {stalled}", True)

    with _ticking(tick, stop):
        yield


@contextmanager
def transferring(host: Any, what: str, measure: Measure) -> Iterator[None]:
    """`measuring` over the deploy's own connection to `host`, said with its name."""

    def say(line: str, warning: bool) -> None:
        (logger.warning if warning else logger.info)(f"{host.print_prefix}{line}")

    def run(script: str) -> str:
        _, output = host.run_shell_command(script, _timeout=READ_SECONDS)
        return output.stdout

    with measuring(say, run, what, measure):
        yield


@contextmanager
def _ticking(tick: Callable[[], None], stop: threading.Event) -> Iterator[None]:
    """`tick` in a thread of its own while the block runs; `stop` set when it ends."""
    threading.Thread(target=tick, daemon=True).start()
    try:
        yield
    finally:
        stop.set()
