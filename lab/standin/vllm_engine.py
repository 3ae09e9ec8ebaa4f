"""The lab stand-in's engine: vLLM's EngineCore busy loop over an executor whose every step is a
collective over every rank, as tensor parallelism's are. Installed beside the stand-in `vllm`
(lab/image.py); both launchers (Ray's in `vllm`, the native one in vllm_native.py) drive it.

- One loop schedules the waiting requests into the running batch (up to --max-num-seqs) and runs
  one step at a time; each step gives every running request one token (vllm/v1/engine/core.py:
  EngineCore.step, vllm/v1/core/sched/scheduler.py).
- A step's model run goes to every rank and waits for every rank's answer: vLLM's executor
  broadcasts the scheduler's output through its MessageQueue (vllm/distributed/
  device_communicators/shm_broadcast.py) and the workers' forward pass meets in the TP
  all-reduce (vllm/distributed/communication_op.py: tensor_model_parallel_all_reduce), so one
  rank that stops holds every running request. Nothing else watches the ranks' progress: the
  head's /health stays 200 (vllm/entrypoints/serve/instrumentator/health.py asks only whether
  the engine is already dead).
- A rank that never answers ends the step after VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS (vllm/envs.py,
  300 s; v1/executor/multiproc_executor.py: collective_rpc) with "RPC call to execute_model timed
  out.": the engine is dead, /health answers 503 and the API server exits 5 s later
  (vllm/entrypoints/launcher.py: watchdog_loop).
- The API server waits for its engine to be ready (every rank joined, the weights loaded) up to
  VLLM_ENGINE_READY_TIMEOUT_S (vllm/envs.py, 600 s; v1/engine/core_client.py: MPClient, its
  poll of the engines' ready messages), then raises "Timed out waiting for engine core processes
  to start" and exits 1, whichever launcher runs the ranks (`ready_bound`).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator

from vllm_metrics import CACHE_CONFIG, Metrics

# vllm/envs.py: the stand-in reads the same variable, so tests shorten it as an operator would
EXECUTE_MODEL_TIMEOUT = int(os.environ.get("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "300"))
ENGINE_READY_TIMEOUT = int(os.environ.get("VLLM_ENGINE_READY_TIMEOUT_S", "600"))
MAX_NUM_SEQS = 256  # vllm/engine/arg_utils.py: the API server's default on a GPU
KV_CAPACITY = int(CACHE_CONFIG["num_gpu_blocks"]) * int(CACHE_CONFIG["block_size"])  # tokens
TIMED_OUT = "TimeoutError: RPC call to execute_model timed out."


class EngineDeadError(RuntimeError):
    """vllm/v1/engine/exceptions.py: what a request gets once the engine died."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def not_ready() -> str:
    """vLLM's error when its engine is not ready in time (v1/engine/core_client.py)."""
    return (
        "TimeoutError: Timed out waiting for engine core processes to start. This is often "
        f"caused by slow weight loading for large models. Waited {ENGINE_READY_TIMEOUT}s "
        "(configured by VLLM_ENGINE_READY_TIMEOUT_S). To increase the timeout, set the "
        "environment variable: VLLM_ENGINE_READY_TIMEOUT_S=<seconds>"
    )


@contextlib.contextmanager
def ready_bound() -> Iterator[None]:
    """The API server's wait for its engine: past ENGINE_READY_TIMEOUT it gives up with vLLM's
    error and exits 1, its engine's processes with it (a Ray driver's actors go with it)."""

    def give_up() -> None:
        log(f"ERROR {not_ready()}")
        os._exit(1)

    timer = threading.Timer(ENGINE_READY_TIMEOUT, give_up)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


class Peer:
    """One end of a connection between the head and a rank, a line of JSON a message."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.buffer = b""

    def send(self, message: dict) -> None:
        # a vanished peer shows on neither side of vLLM's queues: a failed send is not an error
        with contextlib.suppress(OSError):
            self.conn.sendall(json.dumps(message).encode() + b"\n")

    def receive(self, deadline: float | None) -> dict | None:
        """The next message, or None at the deadline (None: none) or at the connection's end."""
        while b"\n" not in self.buffer:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            self.conn.settimeout(left)
            try:
                chunk = self.conn.recv(4096)
            except OSError:  # the timeout, or a reset
                return None
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:  # not one of the stand-in's ranks
            return None
        return message if isinstance(message, dict) else None


def exchange(peers: list[Peer], step: int) -> None:
    """One step's collective: the step to every rank, then every rank's answer within the RPC
    timeout. A rank gone is no answer (shm_broadcast.py's dequeue waits on), only the deadline
    ends the wait."""
    deadline = time.monotonic() + EXECUTE_MODEL_TIMEOUT
    for peer in peers:
        peer.send({"step": step})
    for peer in peers:
        while (reply := peer.receive(deadline)) is None and time.monotonic() < deadline:
            time.sleep(max(0.0, min(1.0, deadline - time.monotonic())))
        if reply is None or reply.get("done") != step:
            raise EngineDeadError(TIMED_OUT)


def answer(peer: Peer, relay: list[Peer]) -> None:
    """A rank's side: run each step the head sends (through `relay`, its local workers, whose
    every answer it waits for as a worker waits for its all-reduce), answer it, until the head
    is gone."""
    while (message := peer.receive(None)) is not None:
        for worker in relay:
            worker.send(message)
        done = {"done": message["step"]}
        if all(worker.receive(None) == done for worker in relay):
            peer.send(done)


class Request:
    """One completion in the engine: its tokens arrive on `out`, one per step."""

    def __init__(self, prompt_tokens: int, max_tokens: int) -> None:
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.generated = 0
        self.arrived = time.monotonic()
        self.scheduled = self.arrived
        self.last: float | None = None
        self.aborted = False
        self.out: queue.SimpleQueue[int | EngineDeadError | None] = queue.SimpleQueue()

    def tokens(self) -> Iterator[int]:
        """Each token's index as its step ends; EngineDeadError if the engine dies first."""
        while (item := self.out.get()) is not None:
            if isinstance(item, EngineDeadError):
                raise item
            yield item


class Core:
    """EngineCore: the one loop that steps every running request through `collective`."""

    def __init__(
        self,
        collective: Callable[[int], None],
        metrics: Metrics,
        token_seconds: float,
        watchdog_seconds: float,
        max_num_seqs: int | None = None,
    ) -> None:
        self.collective = collective
        self.metrics = metrics
        self.token_seconds = token_seconds
        self.watchdog_seconds = watchdog_seconds
        self.max_num_seqs = max_num_seqs or MAX_NUM_SEQS
        self.dead: str | None = None
        self.steps = 0
        self.waiting: list[Request] = []
        self.running: list[Request] = []
        self.changed = threading.Condition()
        self.on_death: list[Callable[[], None]] = []
        threading.Thread(target=self.loop, daemon=True, name="EngineCore").start()

    def submit(self, prompt_tokens: int, max_tokens: int) -> Request:
        request = Request(prompt_tokens, max(1, max_tokens))
        with self.changed:
            if self.dead:
                raise EngineDeadError(self.dead)
            self.waiting.append(request)
            self.changed.notify()
        return request

    def loop(self) -> None:
        while not self.dead:
            batch, new = self.schedule()
            if not batch:
                continue
            self.steps += 1
            time.sleep(self.token_seconds)  # the forward pass
            try:
                self.collective(self.steps)
            except EngineDeadError as error:
                self.die(str(error))
                return
            self.finish_step(batch, new)

    def schedule(self) -> tuple[list[Request], list[Request]]:
        """The running batch for the next step, the newly scheduled among it."""
        with self.changed:
            while not (self.waiting or self.running or self.dead):
                self.changed.wait()
            aborted = [r for r in self.running if r.aborted]
            for request in aborted:
                self.running.remove(request)
                self.finished(request, "abort", time.monotonic())
            if aborted:
                self.stats()
            new = self.waiting[: max(0, self.max_num_seqs - len(self.running))]
            del self.waiting[: len(new)]
            now = time.monotonic()
            for request in new:
                request.scheduled = now
            self.running += new
            return list(self.running), new

    def finish_step(self, batch: list[Request], new: list[Request]) -> None:
        """One token to every request of the step (a new one's prompt with its first)."""
        now = time.monotonic()
        self.metrics.iteration(sum(r.prompt_tokens for r in new), len(batch))
        for request in batch:
            first = request.last is None
            self.metrics.token(first, now - (request.arrived if first else request.last))
            request.last = now
            request.out.put(request.generated)
            request.generated += 1
            if request.generated >= request.max_tokens:
                with self.changed:
                    self.running.remove(request)
                self.finished(request, "length", now)
                request.out.put(None)
        with self.changed:
            self.stats()

    def stats(self) -> None:
        """SchedulerStats, made after each step's output (scheduler.py: make_stats)."""
        held = sum(r.prompt_tokens + r.generated for r in self.running)
        kv_usage = min(1.0, held / KV_CAPACITY)
        self.metrics.scheduler(len(self.running), len(self.waiting), kv_usage)

    def finished(self, request: Request, reason: str, now: float) -> None:
        queued, tokens = (
            request.scheduled - request.arrived,
            (request.prompt_tokens, request.generated),
        )
        self.metrics.finished(reason, now - request.arrived, queued, tokens)

    def die(self, reason: str) -> None:
        """EngineCore fatal: every request fails, /health answers 503, the API server exits
        after its watchdog (vllm/entrypoints/launcher.py: watchdog_loop)."""
        with self.changed:
            if self.dead:
                return
            self.dead = reason
            for request in self.waiting + self.running:
                request.out.put(EngineDeadError(reason))
            self.changed.notify_all()
        log(f"ERROR EngineDeadError: the engine died ({reason})")
        for hook in self.on_death:
            threading.Thread(target=hook, daemon=True).start()

        def end() -> None:
            time.sleep(self.watchdog_seconds)
            log("ERROR the engine is dead: shutting the API server down")
            os._exit(1)

        threading.Thread(target=end, daemon=True).start()
