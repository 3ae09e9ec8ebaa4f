"""vllm-prestart.sh, run by sh with stand-ins for `podman` (running the script's placement probe
with the image's Python against a stand-in `ray` module whose cluster each case sets) and
`systemctl` (recording its arguments). The probe's Ray calls are the ones Ray 2.60 offers
(ray.init, ray.nodes, ray.wait, ray.util.placement_group); their behaviour is the stand-in's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from halo_cluster.roles.serve import render

FAKE_RAY = {
    "ray/__init__.py": (
        "import json, os\n"
        "CLUSTER = json.loads(os.environ['FAKE_RAY'])\n"
        "def init(**options): pass\n"
        "def nodes():\n"
        "    return [{'Alive': True, 'Resources': {'GPU': 1.0}}] * CLUSTER['nodes']\n"
        "def wait(refs, timeout):\n"
        "    return (refs, []) if CLUSTER['placed'] else ([], refs)\n"
    ),
    "ray/util/__init__.py": "",
    "ray/util/placement_group.py": (
        "class Group:\n"
        "    def ready(self): return 'ref'\n"
        "def placement_group(bundles, strategy): return Group()\n"
        "def remove_placement_group(group): pass\n"
    ),
}


def run(tmp_path: Path, cluster: dict | None) -> tuple[int, str, str]:
    """(exit code, stderr, systemctl's arguments); cluster None: no Ray container."""
    bin_dir = tmp_path / "bin"
    for name, text in FAKE_RAY.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    bin_dir.mkdir()
    exists = 0 if cluster is not None else 1
    # `podman exec -i halo-ray sh -c ...`: run the command here, stdin and all
    (bin_dir / "podman").write_text(
        f'#!/bin/sh\n[ "$1" = container ] && exit {exists}\nshift 3\nexec "$@"\n'
    )
    (bin_dir / "ray").write_text(f"#!{sys.executable}\n")
    (bin_dir / "systemctl").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "systemctl"}\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    script = tmp_path / "vllm-prestart.sh"
    script.write_text(render("vllm-prestart.sh.j2", node="halo1", gpus=2, grace=1))
    env = dict(
        os.environ,
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        PYTHONPATH=str(tmp_path),
        FAKE_RAY=json.dumps(cluster or {}),
    )
    done = subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True, timeout=30)
    calls = tmp_path / "systemctl"
    return done.returncode, done.stderr, calls.read_text() if calls.exists() else ""


def test_a_placeable_group_lets_vllm_start(tmp_path: Path) -> None:
    assert run(tmp_path, {"nodes": 2, "placed": True}) == (0, "", "")


@pytest.mark.parametrize("cluster", [{"nodes": 1, "placed": False}, None])
def test_a_missing_node_or_no_ray_leave_the_wait_to_vllm_start(tmp_path: Path, cluster) -> None:
    assert run(tmp_path, cluster) == (0, "", "")


def test_every_node_up_and_not_placed_restarts_the_heads_ray(tmp_path: Path) -> None:
    code, stderr, calls = run(tmp_path, {"nodes": 2, "placed": False})
    assert code == 1
    assert "every node is up with its GPU but Ray cannot place vLLM's 2 GPUs" in stderr
    assert calls == "--user restart --no-block halo-ray.service\n"


def test_a_failing_probe_is_reported_and_vllm_starts(tmp_path: Path) -> None:
    code, stderr, calls = run(tmp_path, {"placed": True})  # ray.nodes() raises KeyError
    assert (code, calls) == (0, "")
    assert stderr.startswith("halo-vllm: placement check skipped: KeyError")
