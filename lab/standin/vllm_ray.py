"""The lab stand-in's Ray launcher (`--distributed-executor-backend ray`, vLLM's RayExecutorV2),
installed beside the stand-in `vllm` (lab/image.py); Ray's workers import it from there too
(Ray puts the driver's script folder on its workers' sys.path). As vLLM 0.33.0 does it:

- the model resolves by id through huggingface_hub (HF_HUB_OFFLINE honoured) or as a folder with a
  config.json, on the driver's node and on every rank's node (vllm/transformers_utils/config.py,
  vllm/model_executor/model_loader/weight_utils.py);
- one GPU bundle per TP x PP rank, bundle 0 pinned to the driver's node (VLLM_HOST_IP), strategy
  PACK; it waits for the group up to 1800 s with vLLM's log lines, then fails with vLLM's message
  (vllm/v1/executor/ray_utils.py: initialize_ray_cluster, _wait_until_pg_ready);
- one RayWorkerProc actor per bundle; the rank on the driver's node meets the driver through
  sockets in VLLM_RPC_BASE_PATH (default: the temp dir) and a /dev/shm segment, both ways: the
  driver's broadcast queue and the worker's response queue (vllm/distributed/device_communicators/
  shm_broadcast.py, vllm/utils/network_utils.py: get_open_zmq_ipc_path,
  vllm/v1/executor/ray_executor_v2.py). vLLM waits there forever; the stand-in fails after
  HALO_STANDIN_RENDEZVOUS_SECONDS with what is not shared;
- each actor's `run` is its busy loop, answering every engine step (vllm_engine.py), and the
  executor's sentinel: one that ends (the actor, its raylet or its node gone) kills the engine
  (ray_executor_v2.py: start_worker_monitor). Nothing else watches the ranks: a stopped rank
  holds every step until VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS, as in vLLM.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
import threading
import time
import uuid
from multiprocessing import shared_memory
from pathlib import Path

from vllm_engine import Core, Peer, answer, exchange, log

try:
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
except ModuleNotFoundError:  # `bench serve` and the HTTP server alone need no Ray (unit tests)
    ray = None

PG_WAIT_TIMEOUT = 1800  # vllm/v1/executor/ray_utils.py
RENDEZVOUS_SECONDS = float(os.environ.get("HALO_STANDIN_RENDEZVOUS_SECONDS", "120"))
# what a rank reports of its environment: what the tests check Ray's workers see
RANK_ENV = (
    "VLLM_RPC_BASE_PATH",
    "HALO_LAB_IMAGE_PROFILE",
    "TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL",
)


def resolve_model(model: str) -> str:
    """The model's folder on this node, as vLLM finds it: a path, or the Hub's cache by id."""
    if model.startswith("/"):
        if not (Path(model) / "config.json").is_file():
            raise OSError(f"{model}: no config.json: not a model folder on this node")
        return model
    from huggingface_hub import snapshot_download

    folder = snapshot_download(model)
    if not (Path(folder) / "config.json").is_file():
        raise OSError(f"{model}: no config.json in {folder}")
    return folder


def reserve(gpus: int, driver_ip: str) -> object:
    """vLLM's placement group: a GPU per rank, the first on the driver's node."""
    cluster_gpus = ray.cluster_resources().get("GPU", 0)
    if gpus > cluster_gpus:
        log(
            "WARNING The number of required GPUs exceeds the total number of available GPUs "
            f"in the placement group. Required number of devices: {gpus}. "
            f"Total number of devices: {cluster_gpus:.0f}."
        )
    bundles = [{"GPU": 1.0} for _ in range(gpus)]
    bundles[0][f"node:{driver_ip}"] = 0.001
    group = placement_group(bundles, strategy="PACK")
    started, interval = time.time(), 10
    ready_ref = group.ready()
    while time.time() - started < PG_WAIT_TIMEOUT:
        ready, _ = ray.wait([ready_ref], timeout=interval)
        if ready:
            return group
        interval *= 2
        log(
            "INFO Waiting for creating a placement group of specs for "
            f"{int(time.time() - started)} seconds. specs={bundles}. Check `ray status` and "
            "`ray list nodes` to see if you have enough resources."
        )
    raise ValueError(
        f"Cannot provide a placement group requiring {gpus} GPUs "
        f"(placement_group_specs={bundles}) within {PG_WAIT_TIMEOUT} seconds."
    )


class RayWorkerProc:
    """One GPU worker, started by the raylet of its node (in that node's Ray container), named
    as vLLM's (ray_executor_v2.py), so its process is `ray::RayWorkerProc` as on a real node."""

    def setup(self, model: str, driver_env: dict[str, str]) -> dict:
        # vllm/v1/executor/ray_env_utils.py: the driver's variables, where the node sets none
        for name, value in driver_env.items():
            os.environ.setdefault(name, value)
        return {
            "node_ip": ray.util.get_node_ip_address(),
            "node_id": ray.get_runtime_context().get_node_id(),
            "model": resolve_model(model),
            "env": {name: os.environ.get(name) for name in RANK_ENV},
        }

    def meet(self, driver_socket: str, segment: str) -> str:
        """The driver-node rank: read the driver's queue, then open a queue of its own that the
        driver must reach (vLLM's worker_response_mq)."""
        memory = shared_memory.SharedMemory(name=segment, track=False)
        token = bytes(memory.buf[:16]).decode()
        memory.close()
        with socket.socket(socket.AF_UNIX) as conn:
            conn.settimeout(RENDEZVOUS_SECONDS)
            conn.connect(driver_socket)
            conn.sendall(token.encode())
        own = ipc_path()
        server = socket.socket(socket.AF_UNIX)
        server.bind(own)
        server.listen(1)
        server.settimeout(RENDEZVOUS_SECONDS)

        def answer() -> None:
            with server, contextlib.suppress(OSError):
                conn, _ = server.accept()
                conn.sendall(token.encode())
                conn.close()
            with contextlib.suppress(OSError):
                os.unlink(own)

        threading.Thread(target=answer, daemon=True).start()
        return own

    def run(self, driver: tuple[str, int], rank: int) -> None:
        """The worker's busy loop (ray_executor_v2.py: RayWorkerProc.run): every step from the
        driver, answered, until the driver is gone. Its ObjectRef is the executor's sentinel."""
        peer = Peer(socket.create_connection(driver, timeout=RENDEZVOUS_SECONDS))
        peer.send({"rank": rank})
        answer(peer, [])


def ipc_path() -> str:
    """vllm/utils/network_utils.py: get_open_zmq_ipc_path (without the ipc:// scheme)."""
    base = os.environ.get("VLLM_RPC_BASE_PATH") or tempfile.gettempdir()
    return os.path.join(base, str(uuid.uuid4()))


def rendezvous(local: object) -> dict:
    """The driver's side of the same-node handshake, bounded (vLLM's is not)."""
    token = uuid.uuid4().hex[:16]
    memory = shared_memory.SharedMemory(create=True, size=16)
    memory.buf[:16] = token.encode()
    path = ipc_path()
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(path)
        server.listen(1)
        server.settimeout(RENDEZVOUS_SECONDS)
        answer = local.meet.remote(path, memory.name)
        # the worker connects into the listen backlog: its failure shows at once in ray.get
        worker_path = ray.get(answer, timeout=RENDEZVOUS_SECONDS)
        conn, _ = server.accept()
        with conn:
            got = conn.recv(16).decode()
        with socket.socket(socket.AF_UNIX) as back:
            back.settimeout(RENDEZVOUS_SECONDS)
            back.connect(worker_path)
            echoed = back.recv(16).decode()
    except (OSError, ray.exceptions.RayError) as error:
        raise RuntimeError(
            f"the GPU worker on the driver's node did not meet the driver within "
            f"{RENDEZVOUS_SECONDS:.0f} s through {path} and /dev/shm/{memory.name}: the "
            f"driver's and Ray's containers must share VLLM_RPC_BASE_PATH and /dev/shm "
            f"({type(error).__name__}: {last_line(error)})"
        ) from None
    finally:
        server.close()
        with contextlib.suppress(OSError):
            os.unlink(path)
        memory.close()
        memory.unlink()
    if got != token or echoed != token:
        raise RuntimeError("the worker on the driver's node read another /dev/shm segment")
    return {"driver_socket": path, "worker_socket": worker_path}


def last_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [""])[-1][:300]


class RayExecutor:
    """RayExecutorV2's ranks: one actor per bundle, and each step through all of them."""

    def __init__(self, group: object, gpus: int, model: str) -> None:
        self.group = group
        actor = ray.remote(num_cpus=0, num_gpus=1)(RayWorkerProc)
        self.ranks = [
            actor.options(
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=group, placement_group_bundle_index=index
                )
            ).remote()
            for index in range(gpus)
        ]
        driver_env = {k: v for k, v in os.environ.items() if k.startswith(("VLLM_", "NCCL_"))}
        driver_env.pop("VLLM_HOST_IP", None)
        self.info = ray.get([r.setup.remote(model, driver_env) for r in self.ranks], timeout=600)
        here = ray.get_runtime_context().get_node_id()
        local = [r for r, i in zip(self.ranks, self.info, strict=True) if i["node_id"] == here]
        if not local:
            raise RuntimeError("no rank on the driver's node: bundle 0 must be there")
        self.rendezvous = rendezvous(local[0])
        self.peers, self.run_refs = self.start()

    def start(self) -> tuple[list[Peer], list[object]]:
        """Each rank's busy loop, connected to the driver: vLLM's broadcast queue, which remote
        readers reach over TCP on the driver's Ray address (shm_broadcast.py: MessageQueue with
        connect_ip); the stand-in's local rank takes the same TCP path, its /dev/shm queue
        checked once by the rendezvous."""
        server = socket.create_server((ray.util.get_node_ip_address(), 0))
        server.settimeout(RENDEZVOUS_SECONDS)
        refs = [r.run.remote(server.getsockname()[:2], i) for i, r in enumerate(self.ranks)]
        peers: dict[int, Peer] = {}
        with server:
            while len(peers) < len(self.ranks):
                peer = Peer(server.accept()[0])
                hello = peer.receive(time.monotonic() + RENDEZVOUS_SECONDS) or {}
                if isinstance(hello.get("rank"), int):
                    peers[hello["rank"]] = peer
        return [peers[rank] for rank in sorted(peers)], refs

    def collective(self, step: int) -> None:
        exchange(self.peers, step)

    def monitor(self, core: Core) -> None:
        """ray_executor_v2.py: start_worker_monitor's thread, as it is: a rank's `run` ended
        (its actor died) kills the engine; Ray failing under the wait ends the monitor only."""
        while ray.is_initialized():
            try:
                done, _ = ray.wait(self.run_refs, num_returns=1, timeout=5.0)
            except Exception as error:  # upstream catches every error here too
                log(f"ERROR RayWorkerMonitor: unexpected error, exiting monitor thread ({error})")
                return
            if done:
                ranks = [self.run_refs.index(ref) for ref in done]
                core.die(f"RayWorkerProc rank={ranks} died unexpectedly, shutting down executor.")
                return

    def shutdown(self) -> None:
        for rank in self.ranks:
            with contextlib.suppress(Exception):
                ray.kill(rank)
        remove_placement_group(self.group)
