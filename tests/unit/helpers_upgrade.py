"""One fake cluster for the tests of both upgrades (tests/unit/test_upgrade.py, the image's;
test_upgrade_os.py, the kernel's): `FakeCluster`, and the OS upgrade's simulated node, which
answers each step's script as GRUB, kernel-install and dnf would."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

from halo_cluster.config import lock as locks
from halo_cluster.decide import cmdline
from halo_cluster.node import batch
from halo_cluster.node.versions import FIRMWARE_PACKAGES
from halo_cluster.tools import project
from halo_cluster.tools.bench.results import GateResult, Side
from halo_cluster.tools.transport import Result
from halo_cluster.tools.upgrading.imagegate import LocalImage
from tests.recorded import skopeo_digest, versions_output
from tests.unit.configs import VALID_ROCE

NAME = "docker.io/kyuz0/vllm-therock-gfx1151"
REFERENCE = f"{NAME}:latest"
D0 = skopeo_digest()
D1 = "sha256:" + "1" * 64
OLDER = "sha256:" + "9" * 64


def cluster_of(tmp_path: Path):
    """tests/unit/configs.py's two-node config, loaded with every role's section."""
    path = tmp_path / "cluster.yml"
    path.write_text(VALID_ROCE)
    return project.load(path)


class Answer(NamedTuple):
    """A simulated node's answer to one step: its exit code, stdout and stderr."""

    code: int
    out: str
    err: str


TOKEN = "5e0d1c3b2a4f48e6b7c8d9e0f1a2b3c4"
OLD, NEW = "6.18.6-200.fc43", "6.18.9-200.fc43"
FIRMWARE = "20251111-1.fc43"
INTERFACE = "enp1s0f0np0"
GOOD_FIRMWARE = "20260110-1.fc43"


def entry(evr: str) -> str:
    return f"{TOKEN}-{evr}.x86_64"


@dataclass
class SimNode:
    """One node's boot loader, kernels and data link, as the upgrade's scripts see them."""

    name: str
    args: str
    running: str = OLD
    kernels: list[str] = field(default_factory=lambda: ["6.18.5-200.fc43", OLD])
    saved: str = entry(OLD)
    next: str = ""
    broken: tuple[str, ...] = ()  # kernels whose boot leaves the data link down
    firmware: str = FIRMWARE
    boots: int = 0
    scripts: list[str] = field(default_factory=list)

    def answer(self, what: str, script: str) -> Answer:
        self.scripts.append(what)
        if what == "read":
            nevras = [f"kernel-core-{k}.x86_64" for k in self.kernels]
            nevras += [f"{n}-{self.firmware}.noarch" for n in FIRMWARE_PACKAGES]
            versions = versions_output(f"{self.running}.x86_64", nevras, dnf5=False)
            entries = [f"{entry(k)}.conf" for k in self.kernels]
            found = ("\n".join(versions), INTERFACE, self.saved, "\n".join(entries))
            parts = [batch.Part(0, f"{text}\n".encode()) for text in found]
            return Answer(0, batch.joined(parts).decode(), "")
        if what == "install":
            self.kernels += [] if NEW in self.kernels else [NEW]
            self.saved = entry(NEW)  # kernel-install's UPDATEDEFAULT=yes
            self.saved = script.split("grub2-set-default ")[1].split()[0]
        elif what == "entries":
            return Answer(0, "\n".join(f"{entry(k)}.conf" for k in self.kernels), "")
        elif what == "one-time":
            self.next = script.split()[-1]
        elif what == "promote":
            self.saved, self.next = script.split()[-1], ""
        elif what == "reboot":
            chosen, self.next = self.next or self.saved, ""  # GRUB's 00_header
            self.running = chosen.removeprefix(f"{TOKEN}-").removesuffix(".x86_64")
            self.boots += 1
        elif what == "firmware":  # dnf install of the set at the target
            self.firmware = script.split("amd-gpu-firmware-")[1].split()[0]
        elif what == "firmware-back":
            self.firmware = FIRMWARE
        elif what == "remove-bad":  # dnf remove kernel-core-EVR ...
            self.kernels = [k for k in self.kernels if f"kernel-core-{k}" not in script.split()]
        elif what == "observe":
            return Answer(0, self.observed(), "")
        elif what == "running":
            return Answer(0, f"{self.running}.x86_64\n", "")
        return Answer(0, "", "")

    def observed(self, up: bool = True) -> str:
        """`observe_script`'s output on this node (`up`: False, its data link not up yet)."""
        up = up and self.running not in self.broken
        flags = ["BROADCAST", "MULTICAST"] + (["UP"] if up else [])
        link = {"ifname": INTERFACE, "flags": flags, "mtu": 9000, "operstate": "UP"}
        gpu = "/dev/dri/renderD128\n/dev/kfd\n"
        # each kernel boots its entry's arguments, as the kernel role wrote them for its release
        booted = " ".join(cmdline.for_kernel(self.running, self.args.split(), [])[0])
        return observed_output(f"{self.running}.x86_64", booted, json.dumps([link]), "", gpu,
                               self.firmware)  # fmt: skip


def observed_output(
    running: str, cmdline: str, link: str, rdma: str, gpu: str, firmware: str
) -> str:
    """What `osgate.observe_script` prints for these outputs of its commands (batch.py's)."""
    found = (running, cmdline, link, rdma, gpu, firmware)
    parts = [batch.Part(0, f"{text}\n".encode()) for text in found]
    return batch.joined(parts).decode()


@dataclass
class FakeCluster:
    """One fake cluster for both upgrades' phases (upgrading/machine.py's `Reach`, and the
    image phases' `ImageReach`), answering as told and recording what it was asked: the head's
    history (`lines`), the deploys, the steps run on each simulated node (`nodes`: the OS
    upgrade's, answering each step by its name)."""

    nodes: dict[str, SimNode] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)  # (node, step) in turn
    deploys: list[tuple[list[str], list[str]]] = field(default_factory=list)  # (data, limit)
    deploy_code: int = 0

    resolves_to: str = D1
    pull_errors: dict[str, str] = field(default_factory=dict)
    switch_errors: dict[str, str] = field(default_factory=dict)  # pinned: why its deploy failed
    completion_errors: dict[str, str] = field(default_factory=dict)  # pinned: its answer
    not_converged: str | None = None
    images: dict[str, list[LocalImage]] = field(default_factory=dict)
    names: tuple[str, ...] = ("node1", "node2")
    lines: list[dict] = field(default_factory=list)
    switched: list[str] = field(default_factory=list)
    stopped_first: list[bool] = field(default_factory=list)  # each switch's vLLM stop before
    pulled: list[str] = field(default_factory=list)
    removed: dict[str, list[str]] = field(default_factory=dict)
    # a gate without a bench by default: the bench's own tests are test_bench*.py
    left: Side = field(default_factory=lambda: Side("skipped", "bench.gate: false"))
    gated: GateResult = field(default_factory=lambda: GateResult("skipped"))
    benched: list[tuple[Side | None, str]] = field(default_factory=list)  # bench's arguments
    order: list[str] = field(default_factory=list)  # the benches and switches, in turn
    rejoins: list[int] = field(default_factory=list)  # each rejoin: how many calls before it

    def converged(self) -> str | None:
        return self.not_converged

    def resolve(self, reference: str) -> tuple[str | None, str]:
        return self.resolves_to, ""

    def pull(self, image: str) -> dict[str, tuple[float, str]]:
        self.pulled.append(image)
        return {node: (1.5, self.pull_errors.get(node, "")) for node in self.names}

    def versions(self, image: str) -> tuple[str, str]:
        return "2.60.0", "0.33.0+lab1"

    def append(self, line: str) -> None:
        self.lines.append(json.loads(line))

    def switch(self, pinned: str, stop_first: bool = False) -> str | None:
        self.order.append("switch")
        self.switched.append(pinned)
        self.stopped_first.append(stop_first)
        return self.switch_errors.get(pinned)

    def running_other(self, pinned: str) -> dict[str, str]:
        return {}

    def completion(self) -> str | None:
        return self.completion_errors.get(self.switched[-1]) if self.switched else None

    def downtime(self) -> float | None:
        return 12.5

    def local_images(self, node: str) -> list[LocalImage] | str:
        return self.images.get(node, [])

    def remove_images(self, node: str, ids: list[str]) -> str:
        self.removed[node] = ids
        return ""

    def bench_left(self) -> Side:
        self.order.append("bench_left")
        return self.left

    def bench(self, left: Side | None, baseline: str) -> GateResult:
        self.order.append("bench")
        self.benched.append((left, baseline))
        return self.gated

    def states(self) -> dict[str, str]:
        return {"node1": "halo-ray active; halo-vllm activating", "node2": "halo-ray active"}

    def events(self) -> list[str]:
        return [line["event"] for line in self.lines]

    @property
    def history(self) -> list[dict]:
        return self.lines

    # the OS upgrade's steps, and what both share
    @classmethod
    def of(cls, cluster, broken: tuple[str, ...] = ()) -> FakeCluster:
        """The OS upgrade's fake: `cluster`'s nodes simulated, `broken` kernels' boots leaving
        the data link down."""
        args = " ".join(cluster.kernel.args)
        return cls(nodes={n.name: SimNode(n.name, args, broken=broken) for n in cluster.nodes})

    def run(self, node, what: str, script: str, timeout: float = 0) -> Result:
        self.calls.append((node.name, what))
        code, out, err = self.nodes[node.name].answer(what, script)
        return Result(node, code, out, err)

    def deploy(self, data=(), limit=()) -> int:
        self.deploys.append((list(data), list(limit)))
        return self.deploy_code

    def serving(self) -> bool:
        return True

    def rejoin(self) -> str | None:
        self.rejoins.append(len(self.calls))
        return None


def serving_lock(tmp_path: Path, head: str = "node1", **changes) -> Path:
    path = tmp_path / locks.LOCK_FILE
    lock = locks.Lock(head, REFERENCE, D0, "2026-12-01T10:00:00Z", "2.60.0", "0.33.0",
                      serving_since="2026-12-01T10:05:00Z")  # fmt: skip
    locks.write(path, replace(lock, **changes))
    return path


def lock_of(path: Path) -> locks.Lock:
    found, problems = locks.read(path)
    assert found is not None and not problems, problems
    return found
