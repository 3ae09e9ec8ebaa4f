"""The lab stand-in's `/metrics`: vLLM 0.33.0's core Prometheus metrics, with its names, types,
help texts, labels and histogram buckets, counting what the stand-in really serves. Installed
beside the stand-in `vllm` (lab/image.py), whose engine (vllm_engine.py) records into it.

Where each comes from:
- the metrics, their help texts and labels: vllm/v1/metrics/loggers.py (PrometheusStatLogger:
  `model_name` is the served model name, `engine` the engine's index, "0" without data
  parallelism; `vllm:cache_config_info` carries `engine` and the cache config's fields only);
- the buckets: vllm/v1/metrics/buckets.py (REQUEST_LATENCY_BUCKETS, TIME_TO_FIRST_TOKEN_BUCKETS,
  INTER_TOKEN_LATENCY_BUCKETS, ITERATION_TOKENS_BUCKETS), and the per-request token histograms'
  `build_1_2_5_buckets(max_model_len)` (vllm/v1/metrics/loggers.py);
- the finish reasons: vllm/v1/engine/__init__.py (FINISH_REASON_STRINGS);
- the text: prometheus_client's exposition (a counter's family exposed as NAME_total, numbers as
  its floatToGoString writes them), which the lab's image does not carry, so it is written here.
  Not written: prometheus_client's `_created` series and vLLM's other families (prefix cache,
  the request parameters' histograms, the HTTP instrumentator's `http_*`).

The stand-in never preempts and holds no real KV cache: its preemptions stay 0 and its KV cache
use is the running requests' tokens over a fixed capacity (CACHE_CONFIG's blocks).
"""

from __future__ import annotations

import threading

REQUEST_LATENCY_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
    240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
TIME_TO_FIRST_TOKEN_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
INTER_TOKEN_LATENCY_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0,
)  # fmt: skip
ITERATION_TOKENS_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")
LABELS = ("model_name", "engine")
# without --max-model-len vLLM takes the model's own (its config.json max_position_embeddings):
# the lab's model, facebook/opt-125m, has 2048
MODEL_MAX_LEN = 2048
# name: help, of the per-request token histograms (their buckets follow max_model_len)
REQUEST_TOKENS = {
    "vllm:request_prompt_tokens": "Number of prefill tokens processed.",
    "vllm:request_generation_tokens": "Number of generation tokens processed.",
}
# vllm/config/cache.py's defaults where the stand-in has no choice; its capacity is its own
CACHE_CONFIG = {
    "block_size": "16",
    "cache_dtype": "auto",
    "enable_prefix_caching": "True",
    "num_cpu_blocks": "None",
    "num_gpu_blocks": "2048",
}

# name: (type, help) for the gauges and counters (a counter's name without its _total)
SCALARS = {
    "vllm:num_requests_running": ("gauge", "Number of requests in model execution batches."),
    "vllm:num_requests_waiting": ("gauge", "Number of requests waiting to be processed."),
    "vllm:kv_cache_usage_perc": ("gauge", "KV-cache usage. 1 means 100 percent usage."),
    "vllm:num_preemptions": ("counter", "Cumulative number of preemption from the engine."),
    "vllm:prompt_tokens": ("counter", "Number of prefill tokens processed."),
    "vllm:generation_tokens": ("counter", "Number of generation tokens processed."),
}
SUCCESS = ("vllm:request_success", "Count of successfully processed requests.")
INFO = ("vllm:cache_config_info", "Information of the LLMEngine CacheConfig")
# name: (help, buckets)
HISTOGRAMS = {
    "vllm:iteration_tokens_total": (
        "Histogram of number of tokens per engine_step.",
        ITERATION_TOKENS_BUCKETS,
    ),
    "vllm:time_to_first_token_seconds": (
        "Histogram of time to first token in seconds.",
        TIME_TO_FIRST_TOKEN_BUCKETS,
    ),
    "vllm:inter_token_latency_seconds": (
        "Histogram of inter-token latency in seconds.",
        INTER_TOKEN_LATENCY_BUCKETS,
    ),
    "vllm:e2e_request_latency_seconds": (
        "Histogram of e2e request latency in seconds.",
        REQUEST_LATENCY_BUCKETS,
    ),
    "vllm:request_queue_time_seconds": (
        "Histogram of time spent in WAITING phase for request.",
        REQUEST_LATENCY_BUCKETS,
    ),
}


def go_float(value: float) -> str:
    """prometheus_client.utils.floatToGoString: Go's exponent from 1e+07 on."""
    value = float(value)
    if value == float("inf"):
        return "+Inf"
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return text


def labels(pairs: dict[str, str]) -> str:
    """prometheus_client's label text: backslash, newline and quote escaped."""
    escape = {"\\": "\\\\", "\n": "\\n", '"': '\\"'}
    text = (f'{k}="{"".join(escape.get(c, c) for c in v)}"' for k, v in pairs.items())
    return "{" + ",".join(text) + "}"


def build_1_2_5_buckets(max_value: int) -> tuple[int, ...]:
    """vllm/v1/metrics/buckets.py: 1, 2, 5, 10, 20, 50, ... up to `max_value`."""
    buckets, exponent = [], 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return tuple(buckets)
            buckets.append(value)
        exponent += 1


class Histogram:
    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)  # the last one: above every bound (+Inf)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        index = next((i for i, bound in enumerate(self.buckets) if value <= bound), -1)
        self.counts[index] += 1
        self.sum += value

    def lines(self, name: str, base: dict[str, str]) -> list[str]:
        out, total = [], 0
        for bound, count in zip((*self.buckets, float("inf")), self.counts, strict=True):
            total += count
            le = labels({**base, "le": go_float(bound)})
            out.append(f"{name}_bucket{le} {go_float(total)}")
        out.append(f"{name}_count{labels(base)} {go_float(total)}")
        out.append(f"{name}_sum{labels(base)} {go_float(self.sum)}")
        return out


class Metrics:
    """One engine's metrics (engine "0"), as PrometheusStatLogger.record keeps them."""

    def __init__(self, model_name: str, max_model_len: int | None = None) -> None:
        self.base = {"model_name": model_name, "engine": "0"}
        self.lock = threading.Lock()
        self.values = dict.fromkeys(SCALARS, 0.0)
        self.success = dict.fromkeys(FINISH_REASONS, 0)
        self.histograms = {name: Histogram(b) for name, (_, b) in HISTOGRAMS.items()}
        per_request = build_1_2_5_buckets(max_model_len or MODEL_MAX_LEN)
        self.histograms |= {name: Histogram(per_request) for name in REQUEST_TOKENS}

    def scheduler(self, running: int, waiting: int, kv_usage: float) -> None:
        """SchedulerStats: the gauges, set once per engine step."""
        with self.lock:
            self.values["vllm:num_requests_running"] = running
            self.values["vllm:num_requests_waiting"] = waiting
            self.values["vllm:kv_cache_usage_perc"] = kv_usage

    def iteration(self, prompt_tokens: int, generation_tokens: int) -> None:
        """IterationStats of one engine step: its tokens, and one observation of their sum."""
        with self.lock:
            self.values["vllm:prompt_tokens"] += prompt_tokens
            self.values["vllm:generation_tokens"] += generation_tokens
            self.histograms["vllm:iteration_tokens_total"].observe(
                prompt_tokens + generation_tokens
            )

    def token(self, first: bool, seconds: float) -> None:
        """A request's first token's time since arrival, or a later one's since the previous."""
        name = "vllm:time_to_first_token_seconds" if first else "vllm:inter_token_latency_seconds"
        with self.lock:
            self.histograms[name].observe(seconds)

    def finished(self, reason: str, e2e: float, queued: float, tokens: tuple[int, int]) -> None:
        """A finished request (loggers.py record: its finished_requests), `tokens` its prompt's
        and its generated ones."""
        with self.lock:
            self.success[reason] += 1
            self.histograms["vllm:e2e_request_latency_seconds"].observe(e2e)
            self.histograms["vllm:request_queue_time_seconds"].observe(queued)
            for name, count in zip(REQUEST_TOKENS, tokens, strict=True):
                self.histograms[name].observe(count)

    def render(self) -> str:
        with self.lock:
            out: list[str] = []
            for name, (kind, text) in SCALARS.items():
                exposed = f"{name}_total" if kind == "counter" else name
                out += [f"# HELP {exposed} {text}", f"# TYPE {exposed} {kind}"]
                out.append(f"{exposed}{labels(self.base)} {go_float(self.values[name])}")
            name, text = SUCCESS
            out += [f"# HELP {name}_total {text}", f"# TYPE {name}_total counter"]
            for reason, count in self.success.items():
                pairs = {**self.base, "finished_reason": reason}
                out.append(f"{name}_total{labels(pairs)} {go_float(count)}")
            helps = {name: text for name, (text, _) in HISTOGRAMS.items()} | REQUEST_TOKENS
            for name, text in helps.items():
                out += [f"# HELP {name} {text}", f"# TYPE {name} histogram"]
                out += self.histograms[name].lines(name, self.base)
            name, text = INFO
            out += [f"# HELP {name} {text}", f"# TYPE {name} gauge"]
            out.append(f"{name}{labels({**CACHE_CONFIG, 'engine': '0'})} 1.0")
            return "\n".join(out) + "\n"
