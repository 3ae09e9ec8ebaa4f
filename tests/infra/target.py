"""One node as the end-state checks see it (`Target`), shared by tests/infra's conftest and
checks and by the e2e tests: a testinfra host over SSH, and the values the checks read.

Every command the checks run is declared here (`first_reads`, then `second_reads` for those
that name what the first found: the data interface, the cluster user's home) and read in one
SSH command per node and read (`read`: the commands at once on the node, each one's exit
status, stdout and stderr kept apart), in the batched format the deploy and the tools read a
node with (halo_cluster/node/batch.py).
A check then finds its command's result in `run`; a command nobody declared runs on its own:
correct, one round trip more.
"""

from __future__ import annotations

import json
import shlex
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

import pytest
import testinfra
from testinfra.backend.base import CommandResult

from halo_cluster.config.model import Cluster, Node
from halo_cluster.config.serving import SERVE_ENV, SERVING_CONTAINERS
from halo_cluster.decide import flowcontrol
from halo_cluster.decide.safety import resolve_interface
from halo_cluster.node import batch, toolbox, vllmworld
from halo_cluster.node.facts import (
    CONTAINER_IMAGE,
    IMAGE_ID,
    NetworkInterfaces,
    OsRelease,
    SshSessionInterfaces,
    TextFile,
    TextFiles,
    as_user,
)
from halo_cluster.node.firewalldfact import Firewalld
from halo_cluster.node.image import ContainerImage, ContainerImages
from halo_cluster.node.thunderbolt import thunderbolt_links_command
from halo_cluster.node.versions import VersionsInfo, versions_command, versions_process
from halo_cluster.roles import all_packages
from halo_cluster.roles.serve.usermanager import MEMLOCK_ROW, hard_memlock
from halo_cluster.tools.status.read import ray_nodes_command

from . import autoupdate

NOT_VERIFIED = "NOT VERIFIED"
WARN = "WARN"  # a skip whose reason starts so: reported in the table, the run still passes
KEYFILE = "/etc/NetworkManager/system-connections/halo-data.nmconnection"
ENTRIES = "/boot/loader/entries/"
MEMLOCK_LIMITS = "/etc/security/limits.d/90-halo-memlock.conf"
MEMLOCK_DROPINS = tuple(
    f"/etc/systemd/{scope}.conf.d/90-halo-memlock-default.conf" for scope in ("system", "user")
)
# every file the checks read, in one TextFiles read (the deploy's own fact)
FILES = (
    "/etc/os-release",  # the node's Fedora release (every node of a cluster runs one)
    "/etc/default/grub",
    f"{ENTRIES}*.conf",
    "/etc/kernel/cmdline",
    "/proc/cmdline",
    "/etc/halo-cluster/cluster.env",
    MEMLOCK_LIMITS,
    *MEMLOCK_DROPINS,
    *autoupdate.AUTOMATIC_CONFS,  # what dnf5 automatic does when its timer fires
)
ACTIVE_PROFILES = "nmcli -t -f NAME,DEVICE connection show --active"
DEVICE_GROUPS = ("render", "video", "rdma")


@dataclass
class Target:
    """One node: its config, a testinfra host over SSH, and helpers the checks share."""

    cluster: Cluster
    node: Node
    host: testinfra.host.Host
    _read: dict[str, CommandResult] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.node.name

    def run(self, command: str) -> CommandResult:
        """`command`'s result: from the node's one read when declared there, else run now."""
        found = self._read.get(command)
        return found if found is not None else self.host.run(command)

    def out(self, command: str) -> str:
        """The stdout of a command that must succeed (testinfra's `check_output`)."""
        result = self.run(command)
        assert result.rc == 0, f"Unexpected exit code {result.rc} for {result}"
        return result.stdout.rstrip("\r\n")

    def read(self, commands: Iterable[str]) -> None:
        """Run `commands` in one SSH command, at once on the node, and keep each one's result."""
        wanted = [c for c in dict.fromkeys(commands) if c not in self._read]
        if not wanted:
            return
        output = self.host.run(batch.script(wanted)).stdout_bytes
        for command, part in zip(wanted, batch.split(output), strict=False):
            self._read[command] = self.host.backend.result(
                part.status, command.encode(), part.stdout, part.stderr
            )

    def first_reads(self, peers: Iterable[Node]) -> list[str]:
        """Every command the checks run that the config alone names (`peers`: the other
        nodes, for the frame probes)."""
        user = self.cluster.cluster_user
        reads = [
            "systemd-detect-virt --container",
            NetworkInterfaces().command(),
            Firewalld().command(),
            SshSessionInterfaces().command(self.node.ssh_port),
            "test -e /dev/infiniband",
            self.image_id_command,
            self.toolbox_image_command,
            self.inside_toolbox_command,
            TextFiles().command(FILES),
            self.packages_command,
            ACTIVE_PROFILES,
            f"stat -c '%a %U' {KEYFILE}",
            f"id -nG {shlex.quote(user)}",
            self.groups_command,
            self.toolbox_record_command,
            versions_command(),
            autoupdate.SHOW,
            autoupdate.TRIGGER_COMMAND,
        ]
        if self.cluster.serve.enabled:
            reads.append(self.container_images_command)
        for peer in peers:
            reads += self.frames_commands(peer.address)
        if self.node.role == "head":
            reads += [self.ssh_to_worker_command(w.address) for w in self.cluster.workers]
            if self.cluster.serve.enabled:
                reads += [*self.launcher_commands(), home_command(user)]
                reads += [self.curl_command(*request) for request in self.serving_requests()]
        return reads

    def second_reads(self) -> list[str]:
        """The commands that name what the first read found."""
        interface = self.interface
        reads = [f"cat /sys/class/net/{interface}/mtu", f"ip addr show {interface}"]
        if self.node.role == "head" and self.cluster.serve.enabled:
            reads.append(self.serve_env_command)
        if not self.container:
            reads += [
                *([self.services_memlock_command] if self.cluster.serve.enabled else []),
                f"ls /sys/class/net/{interface}/device/infiniband",
                "rdma link show",
                self.pause_command,
            ]
            if self.cluster.interconnect == "thunderbolt":
                reads.append(thunderbolt_links_command())
        return reads

    @property
    def pause_command(self) -> str:
        return f"ethtool -a {self.interface}"

    @cached_property
    def pause(self) -> dict[str, str]:
        """The data port's link-level flow control as `ethtool -a` reports it ({}: none)."""
        return flowcontrol.parse_pause(self.run(self.pause_command).stdout)

    def flow_control_problem(self) -> str | None:
        """What is wrong with the data port's flow control: RX and TX must be on."""
        if not self.pause:
            result = self.run(self.pause_command)
            said = (result.stderr or result.stdout).strip()[-200:]
            return (
                f"{self.name}: `{self.pause_command}` reports no pause parameters ({said}): "
                f"is {self.interface} on ice?"
            )
        if not flowcontrol.applied(self.pause):
            return (
                f"{self.name}: flow control {flowcontrol.describe(self.pause)} on "
                f"{self.interface}, expected RX on TX on: see `journalctl -t halo-flow-control`, "
                "then re-run the deploy"
            )
        return None

    @cached_property
    def container(self) -> str | None:
        """The container technology when this node is one (the lab), else None."""
        virt = self.run("systemd-detect-virt --container").stdout.strip()
        return None if virt in ("", "none") else virt

    @cached_property
    def versions(self) -> VersionsInfo:
        """The kernel and firmware, read as the deploy's InstalledVersions reads them."""
        return versions_process(self.out(versions_command()).splitlines())

    @cached_property
    def interfaces(self) -> dict:
        """Every network interface of the node (the deploy's NetworkInterfaces fact)."""
        fact = NetworkInterfaces()
        return fact.process(self.out(fact.command()).splitlines())

    @cached_property
    def interface(self) -> str:
        name, problem = resolve_interface(self.interfaces, self.node.interface, self.node.mac)
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

    @cached_property
    def files(self) -> dict[str, TextFile]:
        """Every file of FILES that exists."""
        fact = TextFiles()
        return fact.process(self.out(fact.command(FILES)).splitlines())

    @property
    def release(self) -> str:
        """The node's Fedora release (os-release's VERSION_ID), as the deploy reads it."""
        found = OsRelease().process(self.text("/etc/os-release").splitlines())
        return found.get("VERSION_ID") or "?"

    def text(self, path: str) -> str:
        found = self.files.get(path)
        assert found, f"{self.name}: {path} is missing: re-run the deploy"
        return found.text

    @property
    def boot_entries(self) -> list[str]:
        return sorted(p for p in self.files if p.startswith(ENTRIES) and p.endswith(".conf"))

    @property
    def packages_command(self) -> str:
        return "rpm -q --queryformat '%{NAME}\\n' " + " ".join(all_packages())

    @cached_property
    def installed(self) -> set[str]:
        """Which of the roles' packages are installed (rpm prints each one's name on a line, and
        `package NAME is not installed` for the others)."""
        return set(self.run(self.packages_command).stdout.splitlines())

    @property
    def groups_command(self) -> str:
        return f"getent group {' '.join(DEVICE_GROUPS)} | cut -d: -f1"

    @cached_property
    def existing_groups(self) -> set[str]:
        """Which of the device groups exist on this node."""
        return set(self.run(self.groups_command).stdout.split())

    def addresses(self, interface: str) -> list[str]:
        """The IPv4 and IPv6 addresses on `interface`, without their prefix length."""
        lines = self.out(f"ip addr show {interface}").splitlines()
        words = [line.split() for line in lines]
        return [w[1].split("/")[0] for w in words if w and w[0] in ("inet", "inet6")]

    def user_podman(self, command: str) -> str:
        return self.run(as_user(self.cluster.cluster_user, command)).stdout.strip()

    @cached_property
    def has_infiniband(self) -> bool:
        return self.run("test -e /dev/infiniband").rc == 0

    @property
    def image_id_command(self) -> str:
        return as_user(self.cluster.cluster_user, IMAGE_ID + shlex.quote(self.pinned))

    @cached_property
    def image_id(self) -> str:
        return self.run(self.image_id_command).stdout.strip()

    @property
    def pinned(self) -> str:
        """The cluster's image here: the lock's `NAME@sha256:...` (the tag before one)."""
        return self.cluster.container.pinned or self.cluster.image

    @property
    def container_images_command(self) -> str:
        return ContainerImages().command(self.cluster.cluster_user, ("halo-ray", "halo-vllm"))

    @cached_property
    def container_images(self) -> dict[str, ContainerImage]:
        """The image each of our containers runs here ({} when none runs)."""
        lines = self.run(self.container_images_command).stdout.splitlines()
        return ContainerImages().process(lines)

    @property
    def toolbox_image_command(self) -> str:
        name = shlex.quote(self.cluster.toolbox)
        return as_user(self.cluster.cluster_user, CONTAINER_IMAGE + name)

    @cached_property
    def toolbox_image(self) -> str:
        """Id of the image the toolbox was made from ("" when there is no toolbox)."""
        return self.run(self.toolbox_image_command).stdout.strip()

    def in_toolbox(self, command: str) -> str:
        """`command` run inside the cluster's toolbox, as the cluster user."""
        name = shlex.quote(self.cluster.toolbox)
        return as_user(self.cluster.cluster_user, f"toolbox run -c {name} {command}")

    @property
    def inside_toolbox_command(self) -> str:
        # /dev/infiniband asked for on every node: the first read need not know if it exists
        probe = "ls -d /dev/dri /dev/kfd /dev/infiniband 2>/dev/null; echo memlock=$(ulimit -l)"
        name = shlex.quote(self.cluster.toolbox)
        command = f"toolbox run -c {name} sh -c {shlex.quote(probe)}"
        return as_user(self.cluster.cluster_user, command)

    @cached_property
    def inside_toolbox(self) -> str:
        """The GPU/RDMA device nodes present inside the toolbox, then `memlock=<ulimit -l>`."""
        return self.run(self.inside_toolbox_command).stdout.strip()

    @property
    def services_memlock_command(self) -> str:
        """Each service container of ours running here, then its main process's memlock row:
        what RCCL in it gets (rootless podman clamps `Ulimit=memlock=-1` to its manager's)."""
        script = (
            f"for c in {' '.join(SERVING_CONTAINERS)}; do "
            "pid=$(podman inspect --format '{{.State.Pid}}' \"$c\" 2>/dev/null) || continue; "
            '[ "${pid:-0}" -gt 0 ] && '
            f"echo \"$c $(grep '^{MEMLOCK_ROW}' /proc/$pid/limits)\"; done; true"
        )
        return as_user(self.cluster.cluster_user, f"sh -c {shlex.quote(script)}")

    @cached_property
    def services_memlock(self) -> dict[str, str | None]:
        """Running service container -> its hard memlock limit ("unlimited" or bytes)."""
        lines = self.run(self.services_memlock_command).stdout.splitlines()
        return {name: hard_memlock(row) for name, _, row in (ln.partition(" ") for ln in lines)}

    @property
    def toolbox_record_command(self) -> str:
        """What the deploy recorded of the toolbox it made (image and options)."""
        return f"cat ~{self.cluster.cluster_user}/{toolbox.state_file(self.cluster.toolbox)}"

    def frames_commands(self, address: str) -> tuple[str, str]:
        """(full-size ping, one-byte-over ping) to `address`."""
        size = self.cluster.mtu - 28  # IPv4 and ICMP headers
        return (
            f"ping -c 2 -i 0.1 -W 2 -M do -s {size} {address}",
            # refused locally before it leaves: no reply to wait for
            f"ping -c 1 -W 0.2 -M do -s {size + 1} {address}",
        )

    def frames_to(self, address: str) -> tuple[CommandResult, CommandResult]:
        full, over = self.frames_commands(address)
        return self.run(full), self.run(over)

    def ssh_to_worker_command(self, address: str) -> str:
        # UpdateHostKeys=no: checking leaves the user's known_hosts as the deploy wrote it
        # (OpenSSH would otherwise append the worker's other host keys)
        return (
            f"runuser -u {self.cluster.cluster_user} -- ssh -o BatchMode=yes "
            f"-o StrictHostKeyChecking=yes -o UpdateHostKeys=no -o ConnectTimeout=5 {address} true"
        )

    def launcher_commands(self) -> list[str]:
        """The head's reads of how vLLM spans the nodes: Ray's, or the native world's."""
        if self.cluster.serve.launcher == "native":
            return self.world_commands
        return [self.ray_nodes_command, self.ray_without_token_command]

    @property
    def world_commands(self) -> list[str]:
        user, port = self.cluster.cluster_user, self.cluster.serve.master_port
        return [vllmworld.leader_command(user), vllmworld.peers_command(port)]

    @cached_property
    def world(self) -> tuple[int | None, list[str]]:
        """With `serve.launcher: native`: the world size the head's executor reports and the
        nodes whose ranks hold its master port (node/vllmworld.py, the deploy's check)."""
        leader, peers = (self.run(command).stdout for command in self.world_commands)
        return vllmworld.world_size(leader), vllmworld.store_peers(peers.splitlines())

    @property
    def ray_nodes_command(self) -> str:
        ray = shlex.quote(ray_nodes_command())
        return as_user(self.cluster.cluster_user, f"podman exec halo-ray sh -c {ray}")

    @cached_property
    def ray_nodes(self) -> list[list]:
        """[address, alive, GPUs] of every node Ray knows, read in the head's Ray container."""
        found = self.run(self.ray_nodes_command).stdout.strip()
        try:
            return json.loads(found.splitlines()[-1]) if found else []
        except ValueError:
            return []

    @property
    def ray_without_token_command(self) -> str:
        anonymous = "env -u RAY_AUTH_MODE -u RAY_AUTH_TOKEN_PATH -u RAY_AUTH_TOKEN HOME=/none"
        probe = shlex.quote(
            f"ray --version | sed -n 's/.*version //p'; {anonymous} timeout 60 ray status 2>&1"
        )
        return as_user(self.cluster.cluster_user, f"podman exec halo-ray sh -c {probe}")

    @cached_property
    def ray_without_token(self) -> tuple[str, str]:
        """(Ray's version, what `ray status` answers a client without the token), read in the
        head's Ray container."""
        first, _, rest = self.run(self.ray_without_token_command).stdout.partition("\n")
        return first.strip(), rest

    @property
    def url(self) -> str:
        return self.cluster.serve.head_url  # the serve role's derivation, as status reads it

    @cached_property
    def api_key(self) -> str:
        path = self.cluster.serve.api_key_file
        return open(path).read().strip() if path else ""

    def serving_requests(self) -> list[tuple[str, str, str]]:
        """(path, API key, body) of every request the serving checks make to vLLM."""
        key = self.api_key
        requests = [("/health", "", ""), ("/v1/models", key, ""), ("/v1/models", "", "")]
        return [*requests, ("/v1/completions", key, self.completion_body)]

    @property
    def completion_body(self) -> str:
        model = self.cluster.serve.served_model_name
        return json.dumps({"model": model, "prompt": "2+2=", "max_tokens": 4})

    def curl_command(self, path: str, key: str = "", body: str = "") -> str:
        auth = f"-H {shlex.quote('Authorization: Bearer ' + key)} " if key else ""
        data = f"-H 'Content-Type: application/json' -d {shlex.quote(body)} " if body else ""
        return f"curl -s -m 20 -w '\\n%{{http_code}}' {auth}{data}{self.url}{path}"

    def curl(self, path: str, key: str = "", body: str = "") -> tuple[int, str]:
        """(HTTP status, body) of a request to vLLM from the head (0: no answer)."""
        out = self.run(self.curl_command(path, key, body)).stdout
        text, _, code = out.rpartition("\n")
        return int(code) if code.strip().isdigit() else 0, text

    @cached_property
    def home(self) -> str:
        """The cluster user's home."""
        return self.out(home_command(self.cluster.cluster_user)).strip()

    @property
    def serve_env(self) -> str:
        """Both containers' environment file on this node."""
        return f"{self.home}/{SERVE_ENV}"

    @property
    def serve_env_command(self) -> str:
        return f"cat {shlex.quote(self.serve_env)}"

    def behind_the_lock(self) -> tuple[list[str], list[str]]:
        """(warnings, what was found): what would upgrade this node's packages behind os.lock."""
        texts = {p: f.text for p, f in self.files.items() if p in autoupdate.AUTOMATIC_CONFS}
        show = self.out(autoupdate.SHOW).splitlines()  # a failed read is no "not installed"
        triggers = self.run(autoupdate.TRIGGER_COMMAND).stdout.splitlines()  # rc 1: one absent
        return autoupdate.behind_the_lock(show, triggers, texts)

    def not_verified(self, what: str) -> None:
        """Skip as NOT VERIFIED when the hardware cannot exist here; return on real hosts."""
        if self.container:
            pytest.skip(f"{NOT_VERIFIED}: {what}: {self.container} container, no such hardware")


def home_command(user: str) -> str:
    return f"getent passwd {shlex.quote(user)} | cut -d: -f6"


def connects(address: str, port: int) -> bool:
    """A TCP connection from this machine (the controller, on the management side) to a node."""
    try:
        socket.create_connection((address, port), timeout=3).close()
    except OSError:
        return False
    return True
