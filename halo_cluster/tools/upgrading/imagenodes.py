"""The image phases' reach of a real cluster (imagegate.ImageReach): `Nodes` plus the dry run
as `drift` runs it, the head's resolve of the image, the pull on every node with its progress,
the switch through the deploy with vLLM's restarts watched, a /health poller on the head for the
downtime, what each node's containers run, the prune, and the bench gate (bench/gate.py)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from halo_cluster.config.model import Node
from halo_cluster.config.rules import image_name
from halo_cluster.node import progress
from halo_cluster.node.facts import as_user
from halo_cluster.node.image import IMAGES_FORMAT, ResolvedImage, parse_images, versions_command
from halo_cluster.tools import drift
from halo_cluster.tools.bench.results import GateResult, Side
from halo_cluster.tools.upgrading.imagegate import LocalImage, crash_looping, downtime
from halo_cluster.tools.upgrading.machine import last_error
from halo_cluster.tools.upgrading.nodes import READ_SECONDS, Nodes

SERVICES = ("halo-ray", "halo-vllm")
PULL_SECONDS = 3600  # a multi-gigabyte image over a slow link
WATCH_SECONDS = 3  # vLLM's NRestarts read while the deploy runs
# every image's id and the references it is known by, and each container's image id: two
# commands of one batched read (node/batch.py)
LOCAL_IMAGES = {
    "images": "ids=$(podman image ls --all --quiet --no-trunc); "
    '[ -z "$ids" ] || podman image inspect --format \'{{.Id}} {{join .RepoDigests " "}}\' $ids',
    "used": "podman ps --all --no-trunc --format '{{.ImageID}}'",
}


class ImageNodes(Nodes):
    """One image run's reach; `unreachable`, the nodes the probe or the dry run did not reach."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.names = tuple(n.name for n in self.cluster.nodes)
        self.by_name = {n.name: n for n in self.cluster.nodes}
        self.unreachable: dict[str, str] = {}
        self._samples: list[tuple[float, int]] = []
        self._poller: subprocess.Popen | None = None

    def close(self) -> None:
        self._stop_poller()

    def converged(self) -> str | None:
        summary = drift.run(self.config, self.files.entry)
        if summary["exit_code"] == drift.NO_DRIFT:
            return None
        print(drift.report(summary))
        self.unreachable = {
            n: e["reason"] for n, e in summary["nodes"].items() if e["status"] == drift.UNREACHABLE
        }
        if self.unreachable:
            down = ", ".join(self.unreachable)
            return f"{down} cannot be reached (above): nothing was changed"
        return f"a dry run is not converged (drift exit {summary['exit_code']}): deploy first"

    def resolve(self, reference: str) -> tuple[str | None, str]:
        fact = ResolvedImage()
        out = self.run(self.head, "resolve", fact.command(self.user, reference), READ_SECONDS).out
        found = fact.process(out.splitlines())
        return found.digest, found.error

    def pull(self, image: str) -> dict[str, tuple[float, str]]:
        def one(node: Node) -> tuple[float, str]:
            start = time.monotonic()
            pull = as_user(self.user, f"podman pull --quiet {shlex.quote(image)} >/dev/null")
            with progress.measuring(
                lambda line, _: print(f"{node.name}: {line}", flush=True),
                lambda script: self.run(node, "measure", script, progress.READ_SECONDS).out,
                f"podman pull {image}",
                progress.pull_measure(self.user, image),
            ):
                result = self.run(node, "pull", pull, PULL_SECONDS)
            return time.monotonic() - start, "" if result.ok else last_error(result)

        with ThreadPoolExecutor(max_workers=len(self.names)) as pool:
            return dict(zip(self.names, pool.map(one, self.cluster.nodes), strict=True))

    def versions(self, image: str) -> tuple[str, str]:
        out = self.run(self.head, "versions", versions_command(self.user, image), 300).out
        found = (out.strip().splitlines() or [""])[-1].split()
        return (found[0], found[1]) if len(found) == 2 else ("", "")

    # P2
    def switch(self, pinned: str, stop_first: bool = False) -> str | None:
        """The deploy (its lock already says `pinned`), vLLM serving until it stops it just
        before Ray's restart on every node (with `serve.launcher: native`, every rank stopped and
        started together), then vLLM started and its /health wait (`stop_first`: vLLM, or every
        rank, stopped before the deploy); a crash-looping vLLM ends it at once."""
        self._start_poller()
        if stop_first:
            stop = as_user(self.user, "systemctl --user stop halo-vllm")
            for node in self.cluster.nodes if self._native else (self.head,):
                self.run(node, "stop", stop, READ_SECONDS)
        deploy = self.start_deploy(watched=True)
        restarts: list[int] = []
        try:
            while deploy.poll() is None:
                time.sleep(WATCH_SECONDS)
                count = self._vllm_restarts()
                restarts += [count] if count is not None else []
                if crash_looping(restarts):
                    os.killpg(deploy.pid, signal.SIGTERM)
                    deploy.wait()
                    return f"vLLM restarted {restarts[-1] - min(restarts)} times after the switch"
        except KeyboardInterrupt:
            # its own session got no Ctrl-C: passed on, and its end waited for, so that nothing
            # goes on changing the nodes once the upgrade has said what it left
            os.killpg(deploy.pid, signal.SIGINT)
            deploy.wait()
            raise
        if deploy.returncode != 0:
            return f"the deploy on {pinned} failed (pyinfra exit {deploy.returncode}; above)"
        return None

    @property
    def _native(self) -> bool:
        return self.cluster.serve.launcher == "native"

    def _vllm_restarts(self) -> int | None:
        show = as_user(self.user, "systemctl --user show -p NRestarts --value halo-vllm")
        result = self.run(self.head, "restarts", show, 20)
        text = result.out.strip()
        return int(text) if result.ok and text.isdigit() else None

    def _start_poller(self) -> None:
        """A 1 s /health poller on the head, its answers timed here."""
        self._stop_poller()
        self._samples = []
        url = shlex.quote(self.health_url())
        # bounded, and the shell's own echo: once this end closes, SIGPIPE ends the loop there
        bound = 2 * self.cluster.serve.ready_timeout + 600
        loop = (
            f"i=0; while [ $i -lt {bound} ]; do i=$((i + 1)); "
            f"code=$(curl -s -o /dev/null -m 1 -w '%{{http_code}}' {url}); "
            'echo "$code" || exit 0; sleep 1; done'
        )
        argv = self.ssh.argv(self.head, "sh", "-c", shlex.quote(loop))
        self._poller = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._read_poller, args=(self._poller,), daemon=True).start()

    def _read_poller(self, poller: subprocess.Popen) -> None:
        for line in poller.stdout or []:
            status = line.strip()
            self._samples.append((time.monotonic(), int(status) if status.isdigit() else 0))

    def _stop_poller(self) -> None:
        if self._poller is not None:
            self._poller.terminate()
            self._poller.wait()
            self._poller = None

    def downtime(self) -> float | None:
        time.sleep(2)  # the poller's next answers after the deploy's wait saw serving
        self._stop_poller()
        return downtime(list(self._samples))

    # P3
    def running_other(self, pinned: str) -> dict[str, str]:
        def inspect(node: Node) -> str:
            names = " ".join(_units(node, self._native))
            command = f"podman container inspect --format {shlex.quote(IMAGES_FORMAT)} {names}"
            return f"{as_user(self.user, command)} 2>/dev/null"

        other = {}
        for name, result in self.on_all(inspect).items():
            running = parse_images(result.out.splitlines())
            for container in _units(self.by_name[name], self._native):
                found = running.get(container, {}).get("reference", "no container")
                if found != pinned:
                    other.setdefault(name, f"{container} on {found}")
        return other

    # P4
    def local_images(self, node: str) -> list[LocalImage] | str:
        commands = {
            what: as_user(self.user, f"sh -c {shlex.quote(command)}")
            for what, command in LOCAL_IMAGES.items()
        }
        result, parts = self.ssh.read(self.by_name[node], commands, READ_SECONDS)
        if not result.ok:
            return last_error(result)
        for what, part in parts.items():
            if part.status != 0:
                return f"{what}: {part.err.strip()[-200:] or f'exit {part.status}'}"
        name = image_name(self.cluster.container.reference)
        return parse_local_images(parts["images"].lines, parts["used"].lines, name)

    def remove_images(self, node: str, ids: list[str]) -> str:
        rmi = as_user(self.user, f"podman rmi {' '.join(shlex.quote(i) for i in ids)}")
        result = self.run(self.by_name[node], "rmi", rmi, READ_SECONDS)
        return "" if result.ok else last_error(result)

    def bench_left(self) -> Side:
        """The bench gate's runs of the build that serves, before the switch (docs/bench.md)."""
        from halo_cluster.tools.bench import gate  # here: it imports the bench, which is large

        return gate.runs(self.config, "old")

    def bench(self, left: Side | None, baseline: str) -> GateResult:
        """The bench gate's runs of the new build, compared with `left` (docs/bench.md)."""
        from halo_cluster.tools.bench import gate

        return gate.gate(self.config, left, baseline)

    # R
    def states(self) -> dict[str, str]:
        def script(node: Node) -> str:
            return "\n".join(
                f"echo {u} $({as_user(self.user, f'systemctl --user is-active {u}')}) "
                f'"$({as_user(self.user, f"journalctl --user -u {u} -n 1 -q -o cat")})"'
                for u in _units(node, self._native)
            )

        return {
            name: "; ".join(r.out.strip().splitlines()) or f"unreachable ({r.error[-100:]})"
            for name, r in self.on_all(script).items()
        }


def _units(node: Node, native: bool) -> tuple[str, ...]:
    """The services a node runs: Ray everywhere and vLLM on the head, or (`native`) a vLLM rank
    on every node."""
    if native:
        return SERVICES[1:]
    return SERVICES if node.role == "head" else SERVICES[:1]


def parse_local_images(images: list[str], containers: list[str], name: str) -> list[LocalImage]:
    """LOCAL_IMAGES's output (`images`, and the `containers`' image ids): the images known by
    a digest of `name`, and whether a container is made from each."""
    used = {line.strip().removeprefix("sha256:") for line in containers if line.strip()}
    found = []
    for line in images:
        parts = line.split()
        if not parts:
            continue
        own = [r.partition("@")[2] for r in parts[1:] if r.partition("@")[0] == name]
        if own:
            image_id = parts[0].removeprefix("sha256:")
            found.append(LocalImage(image_id, tuple(own), image_id in used))
    return found
