"""The all-reduce probe `make verify` runs when vLLM's NCCL lines are not at hand: its podman
command, its script, and what is read back from NCCL's recorded lines plus the script's result."""

from __future__ import annotations

import shlex
import subprocess

from halo_cluster.decide import nccl
from halo_cluster.tools import allreduce
from tests.recorded import fixture

IMAGE = "docker.io/kyuz0/vllm-therock-gfx1151:latest"
ENV = "/home/vllm/.config/halo-cluster/serve.env"


def printed(world: int = 2, seconds: float = 0.0123, busbw: float = 10.91) -> str:
    """The result line exactly as the script prints it (its own print statement, evaluated)."""
    line = next(x for x in allreduce.SCRIPT.splitlines() if x.startswith("print("))
    return eval(
        line.removeprefix("print(")[:-1], {"world": world, "seconds": seconds, "busbw": busbw}
    )


def argv(command: str) -> list[str]:
    return shlex.split(command.removesuffix(" 2>&1"))


def test_command_runs_one_rank_with_the_serving_options() -> None:
    command = allreduce.command(IMAGE, 1, 2, "192.168.100.1", ENV, has_infiniband=True)
    subprocess.run(["bash", "-n", "-c", command], check=True)
    words = argv(command)
    assert words[:4] == ["timeout", "180", "podman", "run"]
    for option in ("--network=host", "--ipc=host", f"--env-file={ENV}", "keep-groups"):
        assert option in words, option
    assert words[words.index("/dev/infiniband") - 1] == "--device"
    assert "memlock=-1" in words
    for env in (
        "NCCL_DEBUG=INFO",
        "HALO_RANK=1",
        "HALO_WORLD=2",
        "HALO_MASTER=192.168.100.1:29511",
    ):
        assert words[words.index(env) - 1] == "-e", env
    assert words[-4:-1] == [IMAGE, "python3", "-c"]
    compile(words[-1], "allreduce", "exec")


def test_no_rdma_options_without_dev_infiniband() -> None:
    words = argv(allreduce.command(IMAGE, 0, 2, "192.168.100.1", ENV, has_infiniband=False))
    assert "/dev/infiniband" not in words and "memlock=-1" not in words


def test_result_over_rdma_from_recorded_lines() -> None:
    log = fixture("nccl-rccl-roce-strix-halo-toolbox-ray.txt") + printed() + "\n"
    assert nccl.parse(log).rdma
    found = allreduce.measured(log)
    assert found == allreduce.Measured(allreduce.SIZE, 2, 0.0123, 10.91)
    assert found.line() == "all-reduce of 256 MiB on 2 nodes: 12.3 ms, bus bandwidth 10.91 GB/s"


def test_result_over_sockets_from_recorded_lines() -> None:
    log = fixture("nccl-socket-fallback.txt") + printed(busbw=1.2) + "\n"
    assert nccl.parse(log).transport == nccl.SOCKET
    assert allreduce.measured(log).busbw == 1.2


def test_no_result_when_the_script_did_not_finish() -> None:
    assert allreduce.measured(fixture("nccl-socket-fallback.txt")) is None
