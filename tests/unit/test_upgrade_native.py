"""The upgrades with `serve.launcher: native` (upgrading/): a vLLM rank on every node is what each
node must run on the new digest (no Ray), the rollback's stop before its deploy stops every
rank, an image without Ray has its versions read (`none` for Ray); the OS upgrade restarts every
rank together after each node's reboot (`rejoin`), before its serving check."""

from __future__ import annotations

import subprocess
from pathlib import Path

from halo_cluster.node.image import VERSIONS
from halo_cluster.tools import transport
from halo_cluster.tools.upgrading import imagenodes
from halo_cluster.tools.upgrading.imagenodes import ImageNodes
from halo_cluster.tools.upgrading.kernels import Targets
from halo_cluster.tools.upgrading.machine import OK
from halo_cluster.tools.upgrading.nodes import Nodes
from halo_cluster.tools.upgrading.osupgrade import Upgrade
from tests.unit.helpers_native import NATIVE, RAY
from tests.unit.helpers_upgrade import NEW, FakeCluster, cluster_of

PINNED = "docker.io/kyuz0/vllm-therock-gfx1151@sha256:" + "d" * 64
OTHER = "docker.io/kyuz0/vllm-therock-gfx1151@sha256:" + "e" * 64


class FakeSsh:
    """Each node's answer to `podman container inspect` (IMAGES_FORMAT), and every run kept."""

    def __init__(self, running: dict[str, str]) -> None:
        self.running, self.ran = running, []

    def run(self, node, script: str, timeout: float) -> transport.Result:
        self.ran.append((node.name, script))
        return transport.Result(node, 0, "", "")

    def on_all(self, script_of, timeout: float) -> dict[str, transport.Result]:
        found = {}
        for node in NATIVE.nodes:
            assert "halo-ray" not in script_of(node)
            out = f"halo-vllm {self.running[node.name]} {'1' * 64}\n"
            found[node.name] = transport.Result(node, 0, out, "")
        return found


def test_every_node_runs_its_rank_and_no_ray() -> None:
    assert [imagenodes._units(n, True) for n in NATIVE.nodes] == [("halo-vllm",)] * 3
    assert imagenodes._units(RAY.head, False) == ("halo-ray", "halo-vllm")
    assert imagenodes._units(RAY.workers[0], False) == ("halo-ray",)


def test_the_gate_names_a_rank_on_another_image() -> None:
    ssh = FakeSsh({"a": PINNED, "b": PINNED, "c": PINNED})
    nodes = ImageNodes(NATIVE, "cluster.yml", None, ssh)
    assert nodes.running_other(PINNED) == {}
    ssh.running["c"] = OTHER
    assert nodes.running_other(PINNED) == {"c": f"halo-vllm on {OTHER}"}


def test_the_rollbacks_stop_first_stops_every_rank(monkeypatch) -> None:
    ssh = FakeSsh({})
    nodes = ImageNodes(NATIVE, "cluster.yml", None, ssh)
    monkeypatch.setattr(nodes, "_start_poller", lambda: None)
    done = subprocess.Popen(["true"])
    done.wait()
    monkeypatch.setattr(nodes, "start_deploy", lambda watched: done)
    assert nodes.switch(PINNED, stop_first=True) is None
    stopped = [name for name, script in ssh.ran if "systemctl --user stop halo-vllm" in script]
    assert stopped == ["a", "b", "c"]


def test_an_image_without_ray_has_its_versions_read(tmp_path: Path) -> None:
    """VERSIONS run for real after its `/etc/profile` (the image's; this machine's resets PATH):
    the Python that runs `vllm` reads vLLM's dist-info, Ray's absent."""
    site = tmp_path / "site"
    (site / "vllm-0.33.0.dist-info").mkdir(parents=True)
    (site / "vllm-0.33.0.dist-info" / "METADATA").write_text("Name: vllm\nVersion: 0.33.0\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = subprocess.run(["sh", "-c", "command -v python3"], capture_output=True, text=True)
    (bin_dir / "vllm").write_text(f"#!{python.stdout.strip()}\n")
    (bin_dir / "vllm").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHONPATH": str(site), "PYTHONNOUSERSITE": "1"}
    profile, _, rest = VERSIONS.partition("; ")
    assert profile.startswith(". /etc/profile")
    found = subprocess.run(["sh", "-c", rest], capture_output=True, text=True, env=env)
    assert found.stdout.split() == ["none", "0.33.0"], found.stderr


class RanksSsh:
    """Every node's answer to the rank's stop and start: `failing` nodes' fail."""

    def __init__(self, failing: tuple[str, ...] = ()) -> None:
        self.failing, self.ran = failing, []

    def on_all(self, script_of, timeout: float) -> dict[str, transport.Result]:
        found = {}
        for node in NATIVE.nodes:
            self.ran.append((node.name, script_of(node)))
            found[node.name] = transport.Result(node, int(node.name in self.failing), "", "")
        return found


def test_after_a_reboot_every_rank_restarts_together() -> None:
    """The OS upgrade's rejoin (nodes.py): every rank stopped, then every rank started."""
    ssh = RanksSsh()
    assert Nodes(NATIVE, "cluster.yml", None, ssh).rejoin() is None
    verbs = [(name, script.split("systemctl --user ")[1]) for name, script in ssh.ran]
    assert verbs == [(n, "stop halo-vllm") for n in "abc"] + [(n, "start halo-vllm") for n in "abc"]
    failing = RanksSsh(failing=("c",))
    said = Nodes(NATIVE, "cluster.yml", None, failing).rejoin()
    assert said == "the stop of every rank failed on c"
    ray = RanksSsh()
    assert Nodes(RAY, "cluster.yml", None, ray).rejoin() is None and ray.ran == []


def test_the_os_upgrade_rejoins_the_ranks_after_each_reboot(tmp_path: Path) -> None:
    cluster = cluster_of(tmp_path)
    sim = FakeCluster.of(cluster)
    done = Upgrade(cluster, Targets(NEW, None), sim, None, sleep=lambda _: None).upgrade()
    assert done == OK
    reboots = [i for i, (_, what) in enumerate(sim.calls) if what == "reboot"]
    assert len(reboots) == 2 and len(sim.rejoins) == 2
    # each node's ranks rejoin after its reboot, before the next node's
    assert reboots[0] < sim.rejoins[0] <= reboots[1] < sim.rejoins[1]
