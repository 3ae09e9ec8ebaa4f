"""The lab stand-in's native multi-node launcher (no Ray): `vllm serve ... --nnodes N --node-rank R
--master-addr A --master-port P [--headless] --distributed-executor-backend mp`. Installed beside
the stand-in `vllm` (lab/image.py), which imports it only for such a command line. It keeps
vLLM 0.33.0's contracts between the nodes as its source has them:

- the arguments, their defaults and checks (vllm/engine/arg_utils.py: add_cli_args,
  create_engine_config; vllm/config/parallel.py: ParallelConfig; vllm/entrypoints/cli/serve.py);
- the rendezvous on master_addr:master_port: rank 0 hosts torch's TCPStore there, every other
  node connects, and all wait for the whole world up to the process group's timeout
  (`--distributed-timeout-seconds`, else torch's 600 s for NCCL: config/parallel.py); start order
  free within it (vllm/distributed/parallel_state.py: init_distributed_environment);
- the head's HTTP server listens only once every rank joined and the engine is ready, which the
  API server waits for up to VLLM_ENGINE_READY_TIMEOUT_S (600 s, vllm/envs.py,
  v1/engine/core_client.py: vllm_engine.ENGINE_READY_TIMEOUT, shared with the Ray launcher);
- a headless rank serves no HTTP at all and exits only when one of its local workers dies, with
  status 0 (entrypoints/cli/serve.py: run_headless; v1/executor/multiproc_executor.py:
  start_worker_monitor(inline=True)); the head's death neither ends it nor lets it rejoin;
  `--headless` on node rank 0 runs a headless data-parallel engine that waits 5 minutes for a
  front-end on master_addr:29550, then fails (v1/engine/core.py: HANDSHAKE_TIMEOUT_MINS);
- a remote rank's death is not noticed by the head: its /health stays 200 and the next step
  blocks in the message queue until VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS (300 s, vllm/envs.py,
  multiproc_executor.py: execute_model), after which the engine is dead (/health 503, the API
  server exits); a local worker's death ends the engine at once (start_worker_monitor).

The stand-in's ranks are one launcher process per node with one worker process per local GPU
(named VLLM::Worker_TP<rank>, as vLLM's set_process_title names them); every engine step goes from
the head's engine (vllm_engine.py) to each of its own workers and, over the store's TCP
connection, to each other node's launcher, which passes it through its workers and answers once
they all did: a stopped worker anywhere holds every step.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from vllm_engine import ENGINE_READY_TIMEOUT, Core, Peer, answer, exchange, not_ready

DP_RPC_PORT = 29550  # ParallelConfig.data_parallel_rpc_port: a headless DP engine's front-end
NNODES_BACKENDS = ("mp", "uni", "external_launcher")  # config/parallel.py: __post_init__
PG_TIMEOUT = 600  # torch's default for the NCCL world group when no --distributed-timeout-seconds
HANDSHAKE_TIMEOUT_MINS = 5  # vllm/v1/engine/core.py
# a local GPU worker: runs each step its launcher passes it, until its launcher goes (the end of
# its connection is vLLM's death pipe)
WORKER = """import json, os
for line in open(0, "rb"):
    os.write(1, json.dumps({"done": json.loads(line)["step"]}).encode() + b"\\n")
"""

Engine = Callable[[argparse.Namespace, Callable[[int], None]], Core]
Listen = Callable[[argparse.Namespace, Core], None]


class ValidationError(ValueError):
    """pydantic's, as ParallelConfig raises it (a ValueError)."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def check(args: argparse.Namespace) -> None:
    """vLLM's checks in its order: serve.py's, create_engine_config's asserts, then ParallelConfig's
    field bounds and __post_init__ (pydantic turns the latter's ValueError into its own)."""
    if args.headless:
        if args.api_server_count is not None and args.api_server_count > 0:
            raise ValueError(
                f"--api-server-count={args.api_server_count} cannot be used with --headless "
                "(no API servers are started in headless mode)."
            )
        args.api_server_count = 0
    world = args.tensor_parallel_size * args.pipeline_parallel_size
    if args.nnodes > 1:
        if world % args.nnodes:
            raise AssertionError(f"world_size={world} must be divisible by nnodes={args.nnodes}.")
        if args.node_rank >= args.nnodes:
            raise AssertionError(
                f"node_rank={args.node_rank} must be less than nnodes={args.nnodes}."
            )
    for field, value, low in (("nnodes", args.nnodes, 1), ("node_rank", args.node_rank, 0)):
        if value < low:
            raise ValidationError(
                f"1 validation error for ParallelConfig\n{field}\n  Input should be greater "
                f"than or equal to {low} [type=greater_than_equal, input_value={value}, "
                "input_type=int]"
            )
    if args.distributed_executor_backend is None and world > 1:
        args.distributed_executor_backend = "mp"  # no Ray placement group: vLLM picks mp
    if args.nnodes > 1 and args.distributed_executor_backend not in NNODES_BACKENDS:
        raise ValidationError(
            "1 validation error for ParallelConfig\n  Value error, nnodes > 1 can only be set "
            "when distributed executor backend is mp, uni or external_launcher. "
            "[type=value_error, input_type=ArgsKwargs]"
        )


class Worker:
    """A local GPU worker process and the launcher's end of its connection."""

    def __init__(self, rank: int) -> None:
        ours, theirs = socket.socketpair()
        self.process = subprocess.Popen(
            [f"VLLM::Worker_TP{rank}", "-c", WORKER],
            executable=sys.executable,
            stdin=theirs,
            stdout=theirs,
        )
        theirs.close()
        self.peer = Peer(ours)


def start_workers(args: argparse.Namespace, count: int) -> list[Worker]:
    return [Worker(args.node_rank * count + index) for index in range(count)]


def first_death(workers: list[Worker]) -> int:
    """multiproc_executor.py: monitor_workers, on the workers' sentinels; the dead one's index."""
    while True:
        for index, worker in enumerate(workers):
            if worker.process.poll() is not None:
                return index
        time.sleep(0.2)


def gave_up(store: int, joined: int, world: int) -> str:
    """Whose timeout ends the head's wait for the world first: the API server's for its engine,
    or the process group's for the store's clients (torch's message)."""
    if store > ENGINE_READY_TIMEOUT:
        return not_ready()
    return (
        f"DistStoreError: Timed out after {store + 1} seconds waiting for clients. "
        f"{joined}/{world} clients joined."
    )


def host_store(args: argparse.Namespace, local: int) -> dict[int, Peer]:
    """Rank 0's TCPStore: wait until every node joined, then let them all on. The store keeps
    listening; a node that comes later (a restarted rank) is held and never joins the world."""
    server = socket.create_server((args.master_addr, args.master_port))
    server.settimeout(0.5)
    # rank 0 is the store's client too (torch's TCPStore): its connection from the head's own
    # address stays open beside the other nodes' for the process's life, as theirs do
    own = Peer(socket.create_connection((args.master_addr, args.master_port)))
    own.send({"node_rank": 0})
    kept = [own]
    store = args.distributed_timeout_seconds or PG_TIMEOUT
    deadline = time.monotonic() + min(store, ENGINE_READY_TIMEOUT)
    peers: dict[int, Peer] = {}
    while len(peers) < args.nnodes - 1:
        if time.monotonic() > deadline:
            raise TimeoutError(gave_up(store, local * (len(peers) + 1), local * args.nnodes))
        try:
            conn, _ = server.accept()
        except TimeoutError:
            continue
        peer = Peer(conn)
        hello = peer.receive(min(deadline, time.monotonic() + 5)) or {}
        if isinstance(hello.get("node_rank"), int) and hello["node_rank"] > 0:
            peers[hello["node_rank"]] = peer
        elif hello.get("node_rank") == 0:
            kept.append(peer)  # the server's end of rank 0's own connection
    for peer in peers.values():
        peer.send({"world": "complete"})
    threading.Thread(target=hold_latecomers, args=(server, kept), daemon=True).start()
    return peers


def hold_latecomers(server: socket.socket, held: list) -> None:
    # kept open (the list too, with rank 0's own connection): a latecomer waits out its own
    # timeout, as against a running TCPStore
    server.settimeout(None)
    while True:
        conn, _ = server.accept()
        held.append(conn)


def join_store(args: argparse.Namespace) -> Peer:
    """A node rank > 0: connect to the head's store (retrying: start order is free) and wait for
    the whole world, both within the process group's timeout."""
    timeout = args.distributed_timeout_seconds or PG_TIMEOUT
    deadline = time.monotonic() + timeout
    address = (args.master_addr, args.master_port)
    while time.monotonic() < deadline:
        try:
            peer = Peer(socket.create_connection(address, timeout=1))
        except OSError:
            time.sleep(0.5)
            continue
        peer.send({"node_rank": args.node_rank})
        if peer.receive(deadline) is not None:
            return peer
    raise TimeoutError(
        f"DistNetworkError: The client socket has timed out after {timeout * 1000}ms while "
        f"trying to connect to {address} and wait for the world."
    )


def run(
    args: argparse.Namespace,
    save: Callable[[dict], None],
    engine: Engine,
    listen: Listen,
) -> int:
    """The native launcher's process on one node; `save` adds to the stand-in's record,
    `engine` makes the head's engine over a collective, `listen` serves its API."""
    try:
        check(args)
    except (AssertionError, ValueError) as error:
        log(f"{type(error).__name__}: {error}")
        return 1
    if args.node_rank % args.nnodes == 0 and args.headless:
        return wait_for_front_end(args)
    world = args.tensor_parallel_size * args.pipeline_parallel_size
    local = world // args.nnodes
    workers = start_workers(args, local)
    facts = {"node_rank": args.node_rank, "world_size": world, "local_world_size": local}
    save({"native": {**facts, "workers": [w.process.pid for w in workers]}})
    try:
        if args.node_rank == 0:
            return lead(args, workers, local, save, engine, listen)
        return follow(args, workers)
    except TimeoutError as error:
        log(str(error))
        return 1


def lead(
    args: argparse.Namespace,
    workers: list[Worker],
    local: int,
    save: Callable[[dict], None],
    engine: Engine,
    listen: Listen,
) -> int:
    # multiproc_executor.py: _init_executor, the leader's line (the deploy reads its world size)
    mq_ip = os.environ.get("VLLM_HOST_IP") or args.master_addr
    log(f"INFO DP group leader: node_rank=0, node_rank_within_dp=0, master_addr="
        f"{args.master_addr}, mq_connect_ip={mq_ip} (local), world_size={local * args.nnodes}, "
        f"local_world_size={local}")  # fmt: skip
    peers = host_store(args, local)
    save({"joined": sorted(peers)})
    ranks = [w.peer for w in workers] + [peers[rank] for rank in sorted(peers)]
    core = engine(args, lambda step: exchange(ranks, step))

    def watch() -> None:
        index = first_death(workers)
        core.die(f"Worker proc VllmWorker-{index} died unexpectedly, shutting down executor.")

    threading.Thread(target=watch, daemon=True).start()
    log(f"INFO every rank joined: serving on {args.host}:{args.port}")
    listen(args, core)
    return 0


def follow(args: argparse.Namespace, workers: list[Worker]) -> int:
    if not args.headless:  # vLLM's docs start every rank > 0 headless; the stand-in follows too
        log("WARNING node rank > 0 without --headless: the stand-in runs it as a headless rank")
    log(f"INFO Launching vLLM headless multiproc executor, with head node address "
        f"{args.master_addr}:{args.master_port} for torch.distributed process group.")  # fmt: skip
    peer = join_store(args)
    relay = [w.peer for w in workers]

    def steps() -> None:
        answer(peer, relay)
        # vllm#32136: the headless node neither exits nor rejoins a restarted head
        log("ERROR the connection to the head's TCPStore is lost; waiting on the local workers")

    threading.Thread(target=steps, daemon=True).start()
    index = first_death(workers)
    log(f"ERROR Worker proc VllmWorker-{index} died unexpectedly, shutting down executor.")
    for worker in workers:
        worker.process.kill()
    return 0  # run_headless returns: `vllm serve` ends with status 0


def wait_for_front_end(args: argparse.Namespace) -> int:
    """serve.py's run_headless on node rank 0 (node_rank_within_dp == 0): a data-parallel engine
    that hosts no store and waits for an API server that a headless launch never starts."""
    log(f"INFO Launching 1 data parallel engine(s) in headless mode, with head node address "
        f"tcp://{args.master_addr}:{DP_RPC_PORT}.")  # fmt: skip
    time.sleep(HANDSHAKE_TIMEOUT_MINS * 60)
    log("RuntimeError: Did not receive response from front-end process within "
        f"{HANDSHAKE_TIMEOUT_MINS} minutes")  # fmt: skip
    return 1
