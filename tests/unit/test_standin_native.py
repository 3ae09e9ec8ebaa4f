"""The lab stand-in's native multi-node launcher (lab/standin/vllm_native.py) run as real
processes on 127.0.0.1, a head and a headless rank 1 with their own ports, held to vLLM's
contracts between nodes: the arguments and their checks, the rendezvous on master-addr:master-port,
the head listening only once every rank joined, the headless rank serving no HTTP, a rank's death
blocking the head's collective until VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS (shortened here through
the variable itself)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.unit.helpers_standin import (
    STANDIN,
    Cluster,
    completion,
    load,
    native_cluster,  # noqa: F401 (the `cluster` fixture)
    status,
    wait_until,
)

RPC_TIMEOUT = 4  # VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS for these tests (vLLM's is 300)
WATCHDOG = 5  # the stand-in's API server ends this long after the engine died


def listening(pid: int) -> set[int]:
    """The TCP ports a process listens on: its socket inodes in /proc/net/tcp, state LISTEN."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd) if fd.is_symlink() else ""
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def test_the_defaults_are_vllms(monkeypatch) -> None:
    standin = load("standin_defaults", STANDIN)
    args = standin.parse(["serve", "/models/opt"])
    assert (args.nnodes, args.node_rank, args.headless) == (1, 0, False)
    assert (args.master_addr, args.master_port) == ("127.0.0.1", 29501)
    assert args.distributed_executor_backend is None and args.api_server_count is None
    short = standin.parse(["serve", "/models/opt", "-n", "3", "-r", "2"])
    assert (short.nnodes, short.node_rank) == (3, 2)
    monkeypatch.delenv("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", raising=False)
    monkeypatch.delenv("VLLM_ENGINE_READY_TIMEOUT_S", raising=False)
    native = load("standin_native_defaults", STANDIN.parent / "vllm_native.py")
    engine = load("standin_engine_defaults", STANDIN.parent / "vllm_engine.py")
    assert (engine.EXECUTE_MODEL_TIMEOUT, engine.ENGINE_READY_TIMEOUT) == (300, 600)
    assert native.ENGINE_READY_TIMEOUT == 600  # the one the Ray launcher's bound reads too
    assert (native.PG_TIMEOUT, native.HANDSHAKE_TIMEOUT_MINS, native.DP_RPC_PORT) == (600, 5, 29550)


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["--tensor-parallel-size", "3", "-n", "2"], 1,
         "AssertionError: world_size=3 must be divisible by nnodes=2."),
        (["--tensor-parallel-size", "2", "-n", "2", "-r", "2"], 1,
         "AssertionError: node_rank=2 must be less than nnodes=2."),
        (["--tensor-parallel-size", "2", "-n", "2", "-r", "-1"], 1,
         "ValidationError: 1 validation error for ParallelConfig\nnode_rank\n"
         "  Input should be greater than or equal to 0"),
        (["-n", "0", "--headless"], 1,
         "ValidationError: 1 validation error for ParallelConfig\nnnodes\n"
         "  Input should be greater than or equal to 1"),
        (["--tensor-parallel-size", "2", "-n", "2", "--distributed-executor-backend", "ray"], 1,
         "nnodes > 1 can only be set when distributed executor backend is mp, uni or "
         "external_launcher."),
        (["--headless", "--api-server-count", "1"], 1,
         "ValueError: --api-server-count=1 cannot be used with --headless (no API servers are "
         "started in headless mode)."),
        (["--nnodes", "two"], 2, "argument --nnodes/-n: invalid int value: 'two'"),
    ],
)  # fmt: skip
def test_the_arguments_are_refused_as_vllm_refuses_them(
    tmp_path: Path, argv: list[str], code: int, message: str
) -> None:
    (tmp_path / "config.json").write_text("{}")
    argv = [a.replace("--tensor-parallel-size", "--tensor-parallel-size") for a in argv]
    environment = {**os.environ, "HALO_STANDIN_RECORD": str(tmp_path / "record.json")}
    done = subprocess.run(
        [sys.executable, str(STANDIN), "serve", str(tmp_path), *argv],
        capture_output=True, text=True, timeout=30, env=environment,
    )  # fmt: skip
    assert done.returncode == code, done.stderr
    assert message in done.stderr


def test_the_head_listens_only_once_every_rank_joined(cluster: Cluster) -> None:
    head = cluster.start(0)
    wait_until(lambda: cluster.master in listening(head.process.pid), 10, "the head's store")
    time.sleep(1.5)  # rank 1 is not there: the head waits for it
    assert head.process.poll() is None
    assert listening(head.process.pid) == {cluster.master}
    assert status(head.url + "/health") == 0
    worker = cluster.start(1)
    wait_until(lambda: status(head.url + "/health") == 200, 20, "the head serving")
    assert head.native()["world_size"] == 2 and json.loads(head.record.read_text())["joined"] == [1]
    assert listening(worker.process.pid) == set(), "a headless rank serves nothing"
    assert status(worker.url + "/health") == 0
    assert completion(head) == 200


def test_the_start_order_is_free(cluster: Cluster) -> None:
    worker = cluster.start(1)
    time.sleep(2)  # the head's store is not up yet: rank 1 keeps trying
    assert worker.process.poll() is None
    head = cluster.start(0)
    wait_until(lambda: status(head.url + "/health") == 200, 20, "the head serving")
    assert completion(head) == 200


@pytest.mark.parametrize(
    ("rank", "extra", "env", "message"),
    [
        (0, ["--distributed-timeout-seconds", "2"], {},
         "DistStoreError: Timed out after 3 seconds waiting for clients. 1/2 clients joined."),
        (0, [], {"VLLM_ENGINE_READY_TIMEOUT_S": "2"},
         "Timed out waiting for engine core processes to start"),
        (1, ["--distributed-timeout-seconds", "2"], {},
         "DistNetworkError: The client socket has timed out after 2000ms"),
    ],
)  # fmt: skip
def test_a_rank_alone_waits_out_the_timeout_then_fails(
    cluster: Cluster, rank: int, extra: list[str], env: dict, message: str
) -> None:
    alone = cluster.start(rank, *extra, **env)
    time.sleep(1)
    assert alone.process.poll() is None, "a rank waits for the world within the timeout"
    assert alone.process.wait(timeout=15) == 1
    assert message in alone.stderr()
    assert status(alone.url + "/health") == 0


@pytest.mark.parametrize(("work", "code"), [(30, 1), (0, 0)])
def test_the_api_servers_wait_for_its_engine_is_vllms(work: int, code: int) -> None:
    """Either launcher's engine start (the Ray driver's placement group and ranks: `vllm`) runs
    within vllm_engine.ready_bound: past VLLM_ENGINE_READY_TIMEOUT_S the API server exits 1
    with vLLM's error (vllm/v1/engine/core_client.py), a start within it goes on."""
    script = (
        f"import sys, time; sys.path.insert(0, {str(STANDIN.parent)!r}); "
        "from vllm_engine import ready_bound\n"
        f"with ready_bound(): time.sleep({work})\n"
        "print('ready')"
    )
    env = {**os.environ, "VLLM_ENGINE_READY_TIMEOUT_S": "1"}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=20
    )
    assert done.returncode == code, done.stderr
    if code:
        assert time.monotonic() - started < 10, "it gives up at the bound, not after the work"
        assert (
            "ERROR TimeoutError: Timed out waiting for engine core processes to start. This is "
            "often caused by slow weight loading for large models. Waited 1s (configured by "
            "VLLM_ENGINE_READY_TIMEOUT_S)."
        ) in done.stderr
        assert "ready" not in done.stdout
    else:
        assert done.stdout == "ready\n"


def test_a_dead_rank_blocks_the_head_until_the_rpc_timeout(cluster: Cluster) -> None:
    head, worker = cluster.serving(VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS=str(RPC_TIMEOUT))
    assert completion(head) == 200
    worker.process.kill()
    worker.process.wait()
    time.sleep(1)
    assert status(head.url + "/health") == 200, "nothing notices a rank's death while idle"
    answer: dict[str, float] = {}

    def ask() -> None:
        started = time.monotonic()
        answer["status"] = completion(head, timeout=RPC_TIMEOUT + 10)
        answer["seconds"] = time.monotonic() - started

    asking = threading.Thread(target=ask)
    asking.start()
    time.sleep(RPC_TIMEOUT / 2)
    assert asking.is_alive(), "the completion hangs in the collective"
    assert status(head.url + "/health") == 200, "the head's /health stays 200 meanwhile"
    asking.join(RPC_TIMEOUT + 10)
    assert answer["status"] == 500 and answer["seconds"] >= RPC_TIMEOUT - 0.2, answer
    assert status(head.url + "/health") == 503
    assert head.process.wait(timeout=WATCHDOG + 5) == 1
    assert "RPC call to execute_model timed out" in head.stderr()


def test_a_restarted_rank_never_rejoins_the_running_head(cluster: Cluster) -> None:
    head, worker = cluster.serving()
    worker.process.kill()
    worker.process.wait()
    again = cluster.start(1, "--distributed-timeout-seconds", "2")
    assert again.process.wait(timeout=15) == 1
    assert "DistNetworkError" in again.stderr()
    assert status(head.url + "/health") == 200


def test_a_headless_rank_exits_only_when_a_local_worker_dies(cluster: Cluster) -> None:
    head, worker = cluster.serving()
    head.process.kill()
    head.process.wait()
    time.sleep(2)
    assert worker.process.poll() is None, "the head's death does not end a headless rank"
    (local,) = worker.native()["workers"]
    os.kill(local, signal.SIGKILL)
    assert worker.process.wait(timeout=10) == 0  # run_headless returns
    assert "Worker proc VllmWorker-0 died unexpectedly" in worker.stderr()


def test_a_local_worker_death_ends_the_head_at_once(cluster: Cluster) -> None:
    head, _ = cluster.serving()
    (local,) = head.native()["workers"]
    os.kill(local, signal.SIGKILL)
    wait_until(lambda: status(head.url + "/health") == 503, 3, "the engine dead")
    assert head.process.wait(timeout=WATCHDOG + 5) == 1


def test_headless_on_node_rank_zero_waits_for_a_front_end(cluster: Cluster) -> None:
    lone = cluster.start(0, "--headless")
    time.sleep(1.5)
    assert lone.process.poll() is None
    assert listening(lone.process.pid) == set(), "no store on master-port, no HTTP"
    assert "head node address tcp://127.0.0.1:29550" in lone.stderr()


def test_the_head_shows_its_world_as_the_deploy_reads_it(cluster: Cluster) -> None:
    """node/vllmworld.py on the stand-in's real output: the leader's line names the world size,
    and the master port's established connections come from every rank's node (both on
    127.0.0.1 here), the head's own workers included."""
    world = load("serve_world", STANDIN.parents[2] / "halo_cluster" / "node" / "vllmworld.py")
    head, _ = cluster.serving()
    (line,) = [n for n in head.stderr().splitlines() if "DP group leader:" in n]
    assert world.world_size(line) == 2
    ss = subprocess.run(
        ["sh", "-c", world.peers_command(cluster.master)], capture_output=True, text=True
    ).stdout.splitlines()
    assert len(ss) == 2, ss  # the head's own connection and rank 1's
    assert world.store_peers(ss) == ["127.0.0.1"]
    assert world.not_the_world(2, ["127.0.0.1"], 2, ["127.0.0.1"], cluster.master) is None


def test_pipeline_stages_across_three_nodes_pass_vllms_checks() -> None:
    """TP 1 x PP 3 over three nodes: the world size, 3, is divisible by nnodes, 3
    (vllm/config/parallel.py); the stand-in's checks take it as vLLM's do, one worker a node."""
    native = load("standin_native_pp", STANDIN.parent / "vllm_native.py")
    standin = load("standin_pp", STANDIN)
    for rank in range(3):
        args = standin.parse(["serve", "/models/opt", "--tensor-parallel-size", "1",
                              "--pipeline-parallel-size", "3", "--nnodes", "3",
                              "--node-rank", str(rank), "--distributed-executor-backend",
                              "mp"])  # fmt: skip
        native.check(args)
    args = standin.parse(["serve", "/models/opt", "--pipeline-parallel-size", "3",
                          "--nnodes", "2", "--distributed-executor-backend", "mp"])  # fmt: skip
    with pytest.raises(AssertionError, match="world_size=3 must be divisible by nnodes=2"):
        native.check(args)
