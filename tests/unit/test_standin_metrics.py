"""The lab stand-in's `/metrics` (lab/standin/vllm_metrics.py) read by a strict parser of
Prometheus' text format: vLLM 0.33.0's names, types, labels and buckets as its source has them
(the tables below, named with their upstream files), open without the API key, and counting what
the stand-in's engine really served, run here on 127.0.0.1 with a TP 1 world."""

from __future__ import annotations

import itertools
import json
import math
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from types import ModuleType

import pytest

from tests.unit.helpers_promtext import parse, value
from tests.unit.helpers_standin import KEY, load, one_rank

# vllm/v1/metrics/loggers.py (PrometheusStatLogger): exposed name -> type; every one labelled
# model_name and engine, request_success also finished_reason (vllm/v1/engine/__init__.py)
LOGGERS_PY = {
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:prompt_tokens_total": "counter",
    "vllm:generation_tokens_total": "counter",
    "vllm:num_preemptions_total": "counter",
    "vllm:request_success_total": "counter",
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:inter_token_latency_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:request_queue_time_seconds": "histogram",
    "vllm:iteration_tokens_total": "histogram",
    "vllm:request_prompt_tokens": "histogram",
    "vllm:request_generation_tokens": "histogram",
    "vllm:cache_config_info": "gauge",
}
FINISH_REASON_STRINGS = {"stop", "length", "abort", "error", "repetition"}
# vllm/v1/metrics/buckets.py: each histogram's family
REQUEST_LATENCY = [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480,
                   960, 1920, 7680]  # fmt: skip
BUCKETS_PY = {
    "vllm:time_to_first_token_seconds": [
        0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20,
        40, 80, 160, 640, 2560,
    ],
    "vllm:inter_token_latency_seconds": [
        0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20,
        40, 80,
    ],
    "vllm:e2e_request_latency_seconds": REQUEST_LATENCY,
    "vllm:request_queue_time_seconds": REQUEST_LATENCY,
    "vllm:iteration_tokens_total": [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192,
                                    16384],
    # loggers.py: build_1_2_5_buckets(max_model_len), opt-125m's 2048 without --max-model-len
    "vllm:request_prompt_tokens": [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000],
    "vllm:request_generation_tokens": [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000],
}  # fmt: skip


def histogram(family: dict, name: str) -> tuple[list[float], float, float]:
    """Its bounds (cumulative counts checked), its count and its sum."""
    buckets = [(float(s[1]["le"]), s[2]) for s in family["samples"] if s[0] == name + "_bucket"]
    assert [b for b, _ in buckets] == sorted(b for b, _ in buckets) and buckets[-1][0] == math.inf
    assert all(a[1] <= b[1] for a, b in itertools.pairwise(buckets))
    (count,) = [s[2] for s in family["samples"] if s[0] == name + "_count"]
    (total,) = [s[2] for s in family["samples"] if s[0] == name + "_sum"]
    assert buckets[-1][1] == count
    return [b for b, _ in buckets[:-1]], count, total


@pytest.fixture(scope="module")
def standin() -> ModuleType:
    return load("standin_vllm_metrics")


@pytest.fixture
def served(standin) -> Iterator[tuple[str, object]]:
    args = standin.parse(["serve", "/models/opt", "--served-model-name", "opt", "--api-key", KEY])
    core = standin.engine(args, one_rank)
    http = standin.ThreadingHTTPServer(("127.0.0.1", 0), standin.handler(args, core))
    threading.Thread(target=http.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{http.server_address[1]}", core
    http.shutdown()
    http.server_close()


def metrics(url: str) -> dict[str, dict]:
    """/metrics without any key, as Prometheus scrapes vLLM's."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return parse(answer.read().decode())


def complete(url: str, body: dict) -> bytes:
    request = urllib.request.Request(
        url + "/v1/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return answer.read()


def test_the_names_types_labels_and_buckets_are_vllms(served) -> None:
    url, _ = served
    families = metrics(url)
    assert {name: f["type"] for name, f in families.items()} == LOGGERS_PY
    for name, family in families.items():
        for sample, labels, _ in family["samples"]:
            extra = set(labels) - {"model_name", "engine", "le"}
            if name == "vllm:cache_config_info":  # engine and the cache config's fields only
                assert "model_name" not in labels and labels["engine"] == "0"
                assert {"block_size", "num_gpu_blocks"} <= extra
            elif name == "vllm:request_success_total":
                assert extra == {"finished_reason"}
            else:
                assert extra == set(), sample
            if name != "vllm:cache_config_info":
                assert (labels["model_name"], labels["engine"]) == ("opt", "0"), sample
    reasons = {s[1]["finished_reason"] for s in families["vllm:request_success_total"]["samples"]}
    assert reasons == FINISH_REASON_STRINGS
    for name, bounds in BUCKETS_PY.items():
        assert histogram(families[name], name)[0] == bounds, name


def test_it_counts_what_the_engine_served(served) -> None:
    url, core = served
    complete(url, {"prompt": "one two three", "max_tokens": 4})
    stream = complete(url, {"prompt": "a b", "max_tokens": 5, "stream": True})
    assert stream.count(b'"text"') == 5
    complete(url, {"prompt": "x", "max_tokens": 1})
    families = metrics(url)
    assert value(families, "vllm:generation_tokens_total") == 4 + 5 + 1
    assert value(families, "vllm:prompt_tokens_total") == 3 + 2 + 1
    assert value(families, "vllm:request_success_total", finished_reason="length") == 3
    assert value(families, "vllm:num_requests_running") == 0
    assert value(families, "vllm:num_preemptions_total") == 0
    _, first, _ = histogram(
        families["vllm:time_to_first_token_seconds"], "vllm:time_to_first_token_seconds"
    )
    _, gaps, _ = histogram(
        families["vllm:inter_token_latency_seconds"], "vllm:inter_token_latency_seconds"
    )
    _, ended, _ = histogram(
        families["vllm:e2e_request_latency_seconds"], "vllm:e2e_request_latency_seconds"
    )
    assert (first, gaps, ended) == (3, 3 + 4, 3)
    # one observation per engine step, of the step's prompt and generated tokens
    _, steps, tokens = histogram(
        families["vllm:iteration_tokens_total"], "vllm:iteration_tokens_total"
    )
    assert (steps, tokens) == (core.steps, 6 + 10)
    # one observation per finished request, of its prompt's and its generated tokens
    for name, counted in (("prompt", 3 + 2 + 1), ("generation", 4 + 5 + 1)):
        family = f"vllm:request_{name}_tokens"
        assert histogram(families[family], family)[1:] == (3, counted), family


def test_a_client_gone_mid_stream_aborts_its_request(served) -> None:
    url, _ = served
    request = urllib.request.Request(
        url + "/v1/completions",
        json.dumps({"prompt": "p", "max_tokens": 100000, "stream": True}).encode(),
        {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        answer.readline()
    deadline = time.monotonic() + 20
    while value(metrics(url), "vllm:request_success_total", finished_reason="abort") != 1:
        assert time.monotonic() < deadline, "the request was not aborted"
        time.sleep(0.1)
    assert value(metrics(url), "vllm:num_requests_running") == 0


def test_metrics_answer_without_the_key_where_v1_does_not(served) -> None:
    url, _ = served
    metrics(url)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(url + "/v1/models", timeout=10)
    assert refused.value.code == 401


def test_numbers_are_written_as_prometheus_client_writes_them(standin) -> None:
    import vllm_metrics

    assert [vllm_metrics.go_float(v) for v in (0, 1, 16384, 1234567.0, 2.5e7, math.inf)] == [
        "0.0", "1.0", "16384.0", "1.234567e+06", "2.5e+07", "+Inf",
    ]  # fmt: skip
    assert vllm_metrics.labels({"a": 'x"y\\z\n'}) == '{a="x\\"y\\\\z\\n"}'
