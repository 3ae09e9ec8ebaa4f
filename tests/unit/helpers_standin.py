"""The lab's stand-in `vllm` (lab/standin/vllm) as the stand-in's tests run it on 127.0.0.1: loaded
as a module, or as real processes, a head and a headless rank 1 of a TP 2 world over two nodes
(the `cluster` fixture: import `native_cluster` with `# noqa: F401`); shared by its tests."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

STANDIN = Path(__file__).resolve().parents[2] / "lab" / "standin" / "vllm"
sys.path.insert(0, str(STANDIN.parent))  # its modules, found beside it as in the image
KEY = "sk-lab-test-key"


def load(name: str, path: Path = STANDIN) -> ModuleType:
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    spec = importlib.util.spec_from_loader(name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def one_rank(step: int) -> None:
    """A TP 1 world's collective: no other rank to meet."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until(check: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.1)


def status(url: str, body: dict | None = None, timeout: float = 5) -> int:
    data = None if body is None else json.dumps(body).encode()
    try:
        with urllib.request.urlopen(url, data, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0  # nothing answers


class Rank:
    """One node's `vllm serve` of a TP 2 world over two nodes."""

    def __init__(self, folder: Path, rank: int, master: int, extra: list[str], env: dict) -> None:
        self.port = free_port()
        self.record = folder / f"rank{rank}.json"
        self.log = folder / f"rank{rank}.log"
        argv = [
            "serve", str(folder / "model"), "--host", "127.0.0.1", "--port", str(self.port),
            "--tensor-parallel-size", "2", "--distributed-executor-backend", "mp",
            "--nnodes", "2", "--node-rank", str(rank), "--master-addr", "127.0.0.1",
            "--master-port", str(master), *(["--headless"] if rank else []), *extra,
        ]  # fmt: skip
        environment = {**os.environ, "HALO_STANDIN_RECORD": str(self.record), **env}
        environment["VLLM_NO_USAGE_STATS"] = "1"
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(STANDIN), *argv], stderr=log, env=environment
            )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def native(self) -> dict:
        return json.loads(self.record.read_text())["native"]

    def stderr(self) -> str:
        return self.log.read_text()


class Cluster:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.master = free_port()
        self.ranks: list[Rank] = []
        (folder / "model").mkdir()
        (folder / "model" / "config.json").write_text("{}")

    def start(self, rank: int, *extra: str, **env: str) -> Rank:
        started = Rank(self.folder, rank, self.master, list(extra), env)
        self.ranks.append(started)
        return started

    def serving(self, **env: str) -> tuple[Rank, Rank]:
        head, worker = self.start(0, **env), self.start(1, **env)
        wait_until(lambda: status(head.url + "/health") == 200, 20, "the head serving")
        return head, worker


@pytest.fixture(name="cluster")  # its tests take it as `cluster`
def native_cluster(tmp_path: Path) -> Iterator[Cluster]:
    started = Cluster(tmp_path)
    yield started
    for rank in started.ranks:
        if rank.process.poll() is None:
            rank.process.kill()
        rank.process.wait()


def completion(rank: Rank, timeout: float = 5) -> int:
    return status(rank.url + "/v1/completions", {"prompt": "hi", "max_tokens": 2}, timeout)
