"""A stalled rank holds the head's requests while /health stays 200, as in vLLM: the stand-in's
engine steps through every rank (lab/standin/vllm_engine.py), here the native launcher's two
nodes on 127.0.0.1. A GPU hang is the rank's worker process stopped (what `python -m lab freeze`
does on a lab node); thawed before VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS, the requests go on."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.request

import pytest

from tests.unit.helpers_promtext import parse, value
from tests.unit.helpers_standin import (
    completion,
    native_cluster,  # noqa: F401 (the `cluster` fixture)
    status,
)

HOLD = 3  # seconds a rank stays stopped, well inside the RPC timeout below
RPC_TIMEOUT = 60


def scrape(url: str) -> dict:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as answer:
        return parse(answer.read().decode())


@pytest.mark.parametrize("stopped", ["headless", "head"])
def test_a_stopped_rank_holds_every_request_while_health_stays_200(cluster, stopped) -> None:
    head, worker = cluster.serving(VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS=str(RPC_TIMEOUT))
    assert completion(head) == 200
    before = value(scrape(head.url), "vllm:generation_tokens_total")
    (pid,) = (worker if stopped == "headless" else head).native()["workers"]
    os.kill(pid, signal.SIGSTOP)
    answers: list[int] = []
    try:
        asking = [threading.Thread(target=lambda: answers.append(completion(head, 30)))
                  for _ in range(2)]  # fmt: skip
        for thread in asking:
            thread.start()
        time.sleep(HOLD)
        assert answers == [] and all(t.is_alive() for t in asking), "the requests are held"
        assert status(head.url + "/health") == 200, "nothing in vLLM watches a rank's progress"
        metrics = scrape(head.url)
        assert value(metrics, "vllm:generation_tokens_total") == before
    finally:
        os.kill(pid, signal.SIGCONT)
    for thread in asking:
        thread.join(20)
    assert answers == [200, 200]
    assert value(scrape(head.url), "vllm:generation_tokens_total") == before + 2 * 2
    assert status(head.url + "/health") == 200


def test_a_stream_whose_engine_dies_ends_with_vllms_error_event(cluster) -> None:
    head, worker = cluster.serving(VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS="3")
    worker.process.kill()
    worker.process.wait()
    body = json.dumps({"prompt": "hi", "max_tokens": 4, "stream": True}).encode()
    with urllib.request.urlopen(head.url + "/v1/completions", body, timeout=30) as answer:
        assert answer.status == 200  # the headers go before the first step
        events = [line for line in answer.read().decode().splitlines() if line]
    assert events[-1] == "data: [DONE]"
    error = json.loads(events[-2][len("data: ") :])["error"]
    assert error["message"] == "EngineDeadError: TimeoutError: RPC call to execute_model timed out."
