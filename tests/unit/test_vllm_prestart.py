"""vllm-prestart.sh, run by sh with stand-ins for `podman` (printing Ray 2.60's recorded
`ray status` with the GPU usage set per case) and `systemctl` (recording its arguments)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from halo_cluster.render import render
from tests.plan.harness import fixture

RAY_STATUS = fixture("ray-status-two-nodes-2.60.txt")


def run(tmp_path: Path, usage: str | None) -> tuple[int, str, str]:
    """(exit code, stderr, systemctl's arguments) with `ray status` showing `usage` GPUs
    (None: the Ray container does not answer)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    status = tmp_path / "ray-status.txt"
    if usage is not None:
        status.write_text(RAY_STATUS.replace(" 0.0/2.0 GPU", f" {usage}"))
    (bin_dir / "podman").write_text(f"#!/bin/sh\nexec cat {status}\n")
    (bin_dir / "systemctl").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "systemctl"}\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    script = tmp_path / "vllm-prestart.sh"
    script.write_text(render("vllm-prestart.sh.j2", node="halo1", gpus=2, grace=0))
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    done = subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True, timeout=30)
    calls = tmp_path / "systemctl"
    return done.returncode, done.stderr, calls.read_text() if calls.exists() else ""


def test_recorded_status_parses_as_free_gpus(tmp_path: Path) -> None:
    assert " 0.0/2.0 GPU" in RAY_STATUS
    assert run(tmp_path, "0.0/2.0 GPU") == (0, "", "")


@pytest.mark.parametrize("usage", ["0.0/1.0 GPU", "1.0/1.0 GPU", None])
def test_missing_gpus_or_no_ray_leave_the_wait_to_vllm_start(tmp_path: Path, usage) -> None:
    assert run(tmp_path, usage) == (0, "", "")


PG = "GPU ({} used of {} reserved in placement groups)"


@pytest.mark.parametrize(
    ("usage", "held"),
    [
        ("0.0/2.0 " + PG.format("0.0", "1.0"), 1),  # a group's reservation, as Ray 2.60 leaks it
        ("2.0/2.0 " + PG.format("2.0", "2.0"), 2),  # actors running in a group
        ("1.0/2.0 GPU", 1),  # an actor outside any group
    ],
)
def test_gpus_held_with_vllm_stopped_restart_the_heads_ray(tmp_path: Path, usage, held) -> None:
    code, stderr, calls = run(tmp_path, usage)
    assert code == 1
    assert f"Ray keeps {held} of its 2 GPUs reserved with vLLM stopped" in stderr
    assert calls == "--user restart --no-block halo-ray.service\n"


def test_a_group_whose_gpus_are_free_again_counts_as_free(tmp_path: Path) -> None:
    assert run(tmp_path, "0.0/2.0 " + PG.format("0.0", "0.0")) == (0, "", "")
