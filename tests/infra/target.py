"""One node as the end-state checks see it (`Target`), shared by tests/infra's conftest and
checks and by the e2e tests: a testinfra host over SSH, and the values the checks read."""

from __future__ import annotations

import json
import shlex
import socket
from dataclasses import dataclass, field
from functools import cached_property

import pytest
import testinfra

from halo_cluster.config.model import Cluster, Node
from halo_cluster.decide.safety import resolve_interface
from halo_cluster.node.facts import (
    CONTAINER_IMAGE,
    IMAGE_ID,
    Firewalld,
    NetworkInterfaces,
    SshSessionInterfaces,
    as_user,
)
from halo_cluster.node.image import ContainerImage, ContainerImages
from halo_cluster.tools.status import ray_nodes_command

NOT_VERIFIED = "NOT VERIFIED"


@dataclass
class Target:
    """One node: its config, a testinfra host over SSH, and helpers the checks share."""

    cluster: Cluster
    node: Node
    host: testinfra.host.Host
    _frames: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.node.name

    def run(self, command: str) -> testinfra.backend.base.CommandResult:
        return self.host.run(command)

    def out(self, command: str) -> str:
        return self.host.check_output(command)

    @cached_property
    def container(self) -> str | None:
        """The container technology when this node is one (the lab), else None."""
        virt = self.run("systemd-detect-virt --container").stdout.strip()
        return None if virt in ("", "none") else virt

    @cached_property
    def interface(self) -> str:
        fact = NetworkInterfaces()
        interfaces = fact.process(self.out(fact.command()).splitlines())
        name, problem = resolve_interface(interfaces, self.node.interface, self.node.mac)
        assert name, f"{self.name}: {problem}"
        return name

    @cached_property
    def firewall(self) -> dict:
        """firewalld's runtime and permanent zones (the deploy's own fact)."""
        fact = Firewalld()
        return fact.process(self.run(fact.command()).stdout.splitlines())

    @cached_property
    def ssh_interfaces(self) -> list[str]:
        """The interfaces that carry SSH sessions to this node: its management side."""
        fact = SshSessionInterfaces()
        sessions = fact.process(self.out(fact.command(self.node.ssh_port)).splitlines())
        return [s["interface"] for s in sessions if s["interface"]]

    def user_podman(self, command: str) -> str:
        return self.run(as_user(self.cluster.cluster_user, command)).stdout.strip()

    @cached_property
    def has_infiniband(self) -> bool:
        return self.host.file("/dev/infiniband").exists

    @cached_property
    def image_id(self) -> str:
        """Id of the cluster's image here: the lock's `NAME@sha256:...` (the tag before one)."""
        return self.user_podman(IMAGE_ID + shlex.quote(self.pinned))

    @property
    def pinned(self) -> str:
        return self.cluster.container.pinned or self.cluster.image

    @cached_property
    def container_images(self) -> dict[str, ContainerImage]:
        """The image each of our containers runs here ({} when none runs)."""
        fact = ContainerImages()
        command = fact.command(self.cluster.cluster_user, ("halo-ray", "halo-vllm"))
        return fact.process(self.run(command).stdout.splitlines())

    @cached_property
    def toolbox_image(self) -> str:
        """Id of the image the toolbox was made from ("" when there is no toolbox)."""
        return self.user_podman(CONTAINER_IMAGE + shlex.quote(self.cluster.toolbox))

    @cached_property
    def inside_toolbox(self) -> str:
        """The GPU/RDMA device nodes present inside the toolbox, then `memlock=<ulimit -l>`."""
        devices = "/dev/dri /dev/kfd" + (" /dev/infiniband" if self.has_infiniband else "")
        probe = f"ls -d {devices} 2>/dev/null; echo memlock=$(ulimit -l)"
        name = shlex.quote(self.cluster.toolbox)
        return self.user_podman(f"toolbox run -c {name} sh -c {shlex.quote(probe)}")

    def frames_to(self, address: str, size: int) -> tuple:
        """(full-size ping, one-byte-over ping) to `address`, read once per run."""
        key = (address, size)
        if key not in self._frames:
            self._frames[key] = (
                self.run(f"ping -c 2 -i 0.1 -W 2 -M do -s {size} {address}"),
                # refused locally before it leaves: no reply to wait for
                self.run(f"ping -c 1 -W 0.2 -M do -s {size + 1} {address}"),
            )
        return self._frames[key]

    @cached_property
    def ray_nodes(self) -> list[list]:
        """[address, alive, GPUs] of every node Ray knows, read in the head's Ray container."""
        ray = shlex.quote(ray_nodes_command())
        found = self.user_podman(f"podman exec halo-ray sh -c {ray}")
        try:
            return json.loads(found.splitlines()[-1]) if found else []
        except ValueError:
            return []

    @cached_property
    def ray_without_token(self) -> tuple[str, str]:
        """(Ray's version, what `ray status` answers a client without the token), read in the
        head's Ray container."""
        anonymous = "env -u RAY_AUTH_MODE -u RAY_AUTH_TOKEN_PATH -u RAY_AUTH_TOKEN HOME=/none"
        probe = shlex.quote(
            f"ray --version | sed -n 's/.*version //p'; {anonymous} timeout 60 ray status 2>&1"
        )
        command = f"podman exec halo-ray sh -c {probe}"
        found = self.run(as_user(self.cluster.cluster_user, command)).stdout
        first, _, rest = found.partition("\n")
        return first.strip(), rest

    def slow_values(self) -> list[str]:
        """The values worth reading before the checks, each at once with the others (one SSH
        connection per node carries them all)."""
        values = ["interface", "container", "image_id", "toolbox_image", "inside_toolbox"]
        values += ["firewall", "ssh_interfaces"]
        if self.cluster.serve.enabled:
            values += ["container_images"]
        if self.cluster.serve.enabled and self.node.role == "head":
            values += ["ray_nodes", "ray_without_token"]
        return values

    def not_verified(self, what: str) -> None:
        """Skip as NOT VERIFIED when the hardware cannot exist here; return on real hosts."""
        if self.container:
            pytest.skip(f"{NOT_VERIFIED}: {what}: {self.container} container, no such hardware")


def connects(address: str, port: int) -> bool:
    """A TCP connection from this machine (the controller, on the management side) to a node."""
    try:
        socket.create_connection((address, port), timeout=3).close()
    except OSError:
        return False
    return True
