"""What the metrics role's two quadlets on the head share (Prometheus', prometheus.py, and
Grafana's, grafana.py): the image pinned by digest, recorded in the cluster's lock (pins.py) and
in the quadlet's comment, the removal of their files, their start or restart."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass

from pyinfra import host, logger
from pyinfra.operations import server

from halo_cluster.config.rules import image_digest, image_name
from halo_cluster.config.schema import host_name
from halo_cluster.node.facts import as_user
from halo_cluster.node.image import ContainerImages, ResolvedImage
from halo_cluster.node.nodefiles import cached, node_files
from halo_cluster.node.operations import text_file
from halo_cluster.node.report import fail
from halo_cluster.roles.metrics import pins
from halo_cluster.roles.metrics.facts import Units

# the quadlet's record of the digest a tag resolved to (its second line): the head's own
# record, which a lock without the pin adopts (pins.py)
RESOLVED_FROM = re.compile(r"^# image: (\S+) resolved to (sha256:[0-9a-f]{64})$", re.MULTILINE)


@dataclass(frozen=True)
class Quadlet:
    service: str  # the container's and the unit's name: halo-prometheus
    whose: str  # what the operations' names say: "Prometheus'"
    key: str  # the image's key: metrics.image
    unit: str  # the quadlet's path below the user's home

    def reference(self) -> str:
        return getattr(host.data, host_name(self.key))

    def resolves(self, data) -> bool:
        """Whether the head asks the registry in this run: a tag the lock does not pin."""
        reference = getattr(data, host_name(self.key))
        return not image_digest(reference) and self.key not in data.halo_metrics_locked

    def unit_path(self) -> str:
        user = host.data.halo_cluster_user
        return f"{node_files(host).home(user) or f'/home/{user}'}/{self.unit}"

    def pinned(self) -> str | None:
        found = self.found()
        return found.image if found else None

    def found(self) -> pins.Found | None:
        """`NAME@sha256:...` it runs, and from where: as written when the key has a digest; else
        the lock's pin for the same reference (a converged head asks no registry); else the
        digest the quadlet records for it (the head's record: adopted into the lock); else the
        head's resolve now (recorded in the lock when the run runs)."""
        reference = self.reference()
        if image_digest(reference):
            return pins.Found(reference, pins.WRITTEN)
        if locked := host.data.halo_metrics_locked.get(self.key):
            return pins.Found(locked, pins.LOCKED)
        recorded = RESOLVED_FROM.search(node_files(host).text(self.unit_path()) or "")
        if recorded and recorded.group(1) == reference:
            return pins.Found(f"{image_name(reference)}@{recorded.group(2)}", pins.HEAD)
        user = host.data.halo_cluster_user
        resolved = cached(host, ResolvedImage, user=user, reference=reference)
        if resolved.digest:
            return pins.Found(f"{image_name(reference)}@{resolved.digest}", pins.RESOLVED)
        if resolved.skopeo_missing:
            # a fresh head: the packages role installs skopeo in this run, after the reads
            logger.warning(
                f"{host.print_prefix}{self.service} starts on the next run: skopeo was not "
                f"installed when {reference} was to be resolved"
            )
            return None
        fail(host, f"{self.key}: {reference} could not be resolved to a digest: {resolved.error}")
        return None

    def converge(
        self,
        table: dict[str, tuple[str, str, bool]],
        wanted: Callable[[dict[str, str]], dict[str, str] | None],
        here: bool,
        off: str,
    ) -> None:
        """Its files (`table`: name -> path below the home, mode, secret), as `wanted` renders
        them from their paths, where it runs (`here`; None: wait for the next run), removed on
        every other node (a former head's) or when `off`; then started or restarted."""
        user = host.data.halo_cluster_user
        files = node_files(host)
        home = files.home(user) or f"/home/{user}"
        where = {name: f"{home}/{path}" for name, (path, _, _) in table.items()}
        found = wanted(where) if here else {}
        if found is None:
            return
        self.remove([where[n] for n in where if n not in found and files.exists(where[n])], off)
        changed = False
        for name, text in found.items():
            _, mode, secret = table[name]
            changed = files.differs(where[name], text, mode) or changed
            text_file(
                name=f"{self.whose} {where[name]}",
                path=where[name],
                text=text,
                mode=mode,
                owner=user,
                secret=secret,
            )
        if found:
            self.start(changed, files.differs(where["unit"], found["unit"], "644"))
            if pinned := self.found():
                pins.record(self.key, self.reference(), pinned, self.whose)

    def remove(self, present: list[str], why: str) -> None:
        if not present:
            return
        user = host.data.halo_cluster_user
        stop = as_user(user, f"systemctl --user stop {self.service}.service")
        server.shell(
            name=f"Stop and remove {self.whose} files ({why})",
            commands=[
                f"{stop} 2>/dev/null || true",
                f"rm -f {' '.join(shlex.quote(p) for p in present)}",
                as_user(user, "systemctl --user daemon-reload"),
            ],
        )

    def start(self, changed: bool, unit_changed: bool) -> None:
        """Start it, or restart it when its files changed or it runs another image."""
        user, service = host.data.halo_cluster_user, self.service
        state = cached(host, Units, units=(service,), user=user).get(service, {})
        running = cached(host, ContainerImages, user=user, containers=(service,)).get(service)
        other = bool(running and running["reference"] != self.pinned())
        up = state.get("active") in ("active", "activating")
        verb = "restart" if up and (changed or other) else None if up else "start"
        commands = [as_user(user, "systemctl --user daemon-reload")] if unit_changed else []
        if verb:
            commands.append(as_user(user, f"systemctl --user {verb} {service}.service"))
        if commands:
            server.shell(name=f"{(verb or 'reload').capitalize()} {service}", commands=commands)
