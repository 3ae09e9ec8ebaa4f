"""The model copy of `serve.download: once` on the built-in lab: a script that prints numbers, not
a test.

    .venv/bin/python -m bench.model_copy [--mib 1024] [--repeat 3]    (at the checkout's top)

On a converged 2-node lab (`make demo` or a deploy first: the head's key admitted by the worker),
lays a model of --mib MiB of incompressible bytes out in the head's Hugging Face cache (one
safetensors blob, as huggingface_hub keeps it), then times the deploy's own copy command
(`roles/serve/services.copy_command`, rsync over SSH to the worker's data address) into an empty
worker cache, and again into a worker that has it. Checks the worker's copy by sha256. Median of
--repeat runs; prints the rate and what the same rate and 50 Gb/s mean for a 60 GB model. Needs
root, like the lab.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from halo_cluster.node.facts import as_user
from halo_cluster.node.memory import hub_folder
from halo_cluster.roles.serve.services import copy_command
from lab import cli

MODEL = "halo-lab/bench-copy"
REPO = f"~vllm/{hub_folder(MODEL)}"
WORKER = "192.168.100.2"  # node2's data address in the lab
USER = as_user("vllm", "")  # the cluster user, in its session
REAL_MODEL_GB = 60
E810_GBIT = 50


def ssh(node: str, command: str) -> str:
    address = cli.node_address(cli.load_state(), node)
    result = subprocess.run([*cli.ssh_argv(address), command], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{node}: {command[:80]}: {result.stderr[-1000:]}")
    return result.stdout


def seed_head(mib: int) -> str:
    """The model in the head's cache; its blob's sha256."""
    ssh(
        "node1",
        f"{USER} sh -c 'rm -rf {REPO} && mkdir -p {REPO}/blobs {REPO}/refs {REPO}/snapshots/r1 && "
        f"head -c {mib}M /dev/urandom > {REPO}/blobs/b1 && printf r1 > {REPO}/refs/main && "
        f"ln -s ../../blobs/b1 {REPO}/snapshots/r1/model.safetensors'",
    )
    return ssh("node1", f"sha256sum {REPO}/blobs/b1").split()[0]


def timed_copy() -> float:
    start = time.monotonic()
    ssh("node1", f"{USER} {copy_command('vllm', MODEL, WORKER)}")
    return time.monotonic() - start


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    digest = seed_head(args.mib)
    empty, present = [], []
    for _ in range(args.repeat):
        ssh("node2", f"rm -rf {REPO}")
        empty.append(timed_copy())
        copied = ssh("node2", f"sha256sum {REPO}/snapshots/r1/model.safetensors").split()[0]
        if copied != digest:
            raise SystemExit("the worker's copy differs from the head's")
        present.append(timed_copy())
    for node in ("node1", "node2"):
        ssh(node, f"rm -rf {REPO}")
    copy, again = statistics.median(empty), statistics.median(present)
    rate = args.mib * 2**20 / copy  # bytes per second
    print(
        f"| copy of {args.mib} MiB to an empty worker | {copy:.2f} s | {rate / 2**20:.0f} MiB/s |"
    )
    print(f"| the same copy to a worker that has it | {again:.2f} s | |")
    real = REAL_MODEL_GB * 10**9
    print(f"computed: {REAL_MODEL_GB} GB at this rate: {real / rate:.0f} s; at {E810_GBIT} Gb/s "
          f"line rate: {real * 8 / (E810_GBIT * 10**9):.1f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
