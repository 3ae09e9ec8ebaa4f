"""A short all-reduce between the nodes inside the cluster's image (torch.distributed over RCCL,
one rank per node), for `make verify` to read which transport RCCL really used, with NCCL's own
INFO lines, when vLLM's are not at hand (`serve.nccl_debug: false`), and what it measured."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from halo_cluster.node import toolbox

PORT = 29511  # torch's rendezvous on the head's data address (the data link is trusted)
SIZE = 256 * 1024 * 1024
ITERATIONS = 10
TIMEOUT_SECONDS = 180
RESULT = "halo-allreduce:"
SCRIPT = f"""
import os, time, torch, torch.distributed as dist
rank, world = int(os.environ["HALO_RANK"]), int(os.environ["HALO_WORLD"])
dist.init_process_group(
    "nccl", init_method="tcp://" + os.environ["HALO_MASTER"], rank=rank, world_size=world
)
torch.cuda.set_device(0)
data = torch.ones({SIZE} // 4, dtype=torch.float32, device="cuda")
dist.all_reduce(data)  # the first one builds the rings: not timed
torch.cuda.synchronize()
start = time.perf_counter()
for _ in range({ITERATIONS}):
    dist.all_reduce(data)
torch.cuda.synchronize()
seconds = (time.perf_counter() - start) / {ITERATIONS}
busbw = {SIZE} * 2 * (world - 1) / world / seconds / 1e9
print(f"{RESULT} bytes={SIZE} world={{world}} seconds={{seconds:.6f}} busbw={{busbw:.2f}}")
dist.destroy_process_group()
"""
_RESULT = re.compile(
    rf"{RESULT} bytes=(?P<bytes>\d+) world=(?P<world>\d+) seconds=(?P<seconds>[\d.]+) "
    r"busbw=(?P<busbw>[\d.]+)"
)


@dataclass(frozen=True)
class Measured:
    bytes: int
    world: int
    seconds: float
    busbw: float  # GB/s, as nccl-tests count bus bandwidth

    def line(self) -> str:
        return (
            f"all-reduce of {self.bytes // 2**20} MiB on {self.world} nodes: "
            f"{self.seconds * 1000:.1f} ms, bus bandwidth {self.busbw:.2f} GB/s"
        )


def command(
    image: str, rank: int, world: int, head_ip: str, env_file: str, has_infiniband: bool
) -> str:
    """`podman run` of one rank, with the serving containers' devices, options and environment
    and NCCL's INFO lines on; prints NCCL's lines and then the RESULT line."""
    options = [
        "--rm",
        "--network=host",
        "--ipc=host",
        "--security-opt=label=disable",
        *toolbox.options(has_infiniband),
        f"--env-file={env_file}",
        "-e", "NCCL_DEBUG=INFO",
        "-e", "NCCL_DEBUG_SUBSYS=INIT,NET",
        "-e", f"HALO_RANK={rank}",
        "-e", f"HALO_WORLD={world}",
        "-e", f"HALO_MASTER={head_ip}:{PORT}",
    ]  # fmt: skip
    argv = ["podman", "run", *options, image, "python3", "-c", SCRIPT]
    return f"timeout {TIMEOUT_SECONDS} {shlex.join(argv)} 2>&1"


def measured(output: str) -> Measured | None:
    match = _RESULT.search(output)
    if not match:
        return None
    return Measured(
        int(match["bytes"]), int(match["world"]), float(match["seconds"]), float(match["busbw"])
    )
