"""The lab stand-in's `vllm bench serve` (vllm/benchmarks/serve.py, datasets/arg_utils.py at the
design's commits), installed beside the stand-in `vllm` (lab/image.py), which runs it for
`vllm bench serve ...`: the flags halo-cluster passes, `--help=all`, the seeded random workload,
the streamed request as vllm/benchmarks/lib/endpoint_request_func.py sends it (the key from
OPENAI_API_KEY), vLLM's metric names, result file name and fields. Its numbers measure the
stand-in's HTTP path, never a model's."""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

from vllm_engine import log

STANDIN = "lab stand-in for vLLM (no model loaded; output NOT a model's)"
WORDS = ("stand", "in", "lab", "token", "not", "a", "model", "word")  # a word is a token
# a tokenizer folder holds one of these (transformers' fast, sentencepiece or BPE vocabulary)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")


def bench_parser() -> argparse.ArgumentParser:
    """The flags halo-cluster passes, with vLLM's defaults; every other flag is refused, as the
    real parser refuses an unknown one."""
    parser = argparse.ArgumentParser(prog="vllm bench serve")
    add = parser.add_argument
    add("--backend", default="openai", choices=["openai"])
    add("--base-url")
    add("--host", default="127.0.0.1")
    add("--port", type=int, default=8000)
    add("--endpoint", default="/v1/completions")
    add("--model")
    add("--served-model-name")
    add("--tokenizer")
    add("--label")
    add("--dataset-name", default="random", choices=["random"])
    add("--random-input-len", type=int, default=1024)
    add("--random-output-len", type=int, default=128)
    add("--random-range-ratio", type=float, default=0.0)
    add("--num-prompts", type=int, default=1000)
    add("--max-concurrency", type=int)
    add("--request-rate", type=float, default=float("inf"))
    add("--burstiness", type=float, default=1.0)
    add("--seed", type=int, default=0)
    add("--num-warmups", type=int, default=0)
    add("--temperature", type=float)
    add("--ignore-eos", action="store_true")
    add("--save-result", action="store_true")
    add("--save-detailed", action="store_true")
    add("--result-dir")
    add("--result-filename")
    add("--metadata", metavar="KEY=VALUE", nargs="*")
    add("--ready-check-timeout-sec", type=int, default=0)
    return parser


def bench_prompts(args: argparse.Namespace) -> list[str]:
    """The random dataset, seeded as vLLM seeds it: `input_len` words each (one token a word)."""
    rng = random.Random(args.seed)
    return [
        " ".join(rng.choice(WORDS) for _ in range(args.random_input_len))
        for _ in range(args.num_prompts)
    ]


def bench_request(args: argparse.Namespace, prompt: str) -> dict:
    """One streamed completion, timed as endpoint_request_func.async_request_openai_completions
    times it: the first token's arrival (ttft), each later chunk's gap (itl), the whole (latency),
    the output tokens from the usage chunk."""
    url = urlsplit((args.base_url or f"http://{args.host}:{args.port}") + args.endpoint)
    body = {
        "model": args.served_model_name or args.model,
        "prompt": prompt,
        "max_tokens": args.random_output_len,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
    }
    if args.temperature is not None:
        body["temperature"] = args.temperature
    headers = {"Content-Type": "application/json"}
    if os.environ.get("OPENAI_API_KEY"):
        headers["Authorization"] = f"Bearer {os.environ['OPENAI_API_KEY']}"
    out = {
        "success": False,
        "ttft": 0.0,
        "itl": [],
        "latency": 0.0,
        "output_tokens": 0,
        "prompt_len": len(prompt.split()),
        "error": "",
        "start_time": time.perf_counter(),
    }
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=600)
    try:
        conn.request("POST", url.path, json.dumps(body), headers)
        response = conn.getresponse()
        if response.status != 200:
            out["error"] = f"HTTP {response.status}: {response.read()[:200]!r}"
            return out
        last = out["start_time"]
        for raw in response:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[len("data: ") :])
            now = time.perf_counter()
            if chunk.get("choices") and chunk["choices"][0].get("text"):
                if not out["ttft"]:
                    out["ttft"] = now - out["start_time"]
                else:
                    out["itl"].append(now - last)
                last = now
            if chunk.get("usage"):
                out["output_tokens"] = chunk["usage"]["completion_tokens"]
        out["latency"] = last - out["start_time"]
        out["success"] = bool(out["ttft"])
        out["error"] = "" if out["success"] else "no token streamed"
    except (OSError, ValueError, http.client.HTTPException) as error:
        out["error"] = f"{type(error).__name__}: {error}"
    finally:
        conn.close()
    return out


def percentiles(name: str, values: list[float]) -> dict[str, float]:
    """vLLM's {mean,median,std,p99}_NAME_ms (numpy's std: the population's; p99 interpolated)."""
    values = sorted(values) or [0.0]
    rank = 0.99 * (len(values) - 1)
    low = int(rank)
    high = min(low + 1, len(values) - 1)
    p99 = values[low] + (values[high] - values[low]) * (rank - low)
    return {
        f"mean_{name}_ms": statistics.fmean(values) * 1000,
        f"median_{name}_ms": statistics.median(values) * 1000,
        f"std_{name}_ms": statistics.pstdev(values) * 1000,
        f"p99_{name}_ms": p99 * 1000,
    }


def bench_metrics(outputs: list[dict], duration: float, started: float) -> dict:
    """serve.py's calculate_metrics and result fields, for what the stand-in measured."""
    done = [o for o in outputs if o["success"]]
    total_in = sum(o["prompt_len"] for o in done)
    total_out = sum(o["output_tokens"] for o in done)
    tpots = [
        (o["latency"] - o["ttft"]) / (o["output_tokens"] - 1)
        for o in done
        if o["output_tokens"] > 1
    ]
    # the peak of output tokens in one second, and how many requests ran in that second
    per_second: dict[int, int] = {}
    running: dict[int, int] = {}
    for o in done:
        at = o["start_time"] + o["ttft"]
        for gap in [0.0, *o["itl"]]:
            at += gap
            per_second[int(at - started)] = per_second.get(int(at - started), 0) + 1
        first, end = int(o["start_time"] - started), int(o["start_time"] + o["latency"] - started)
        for second in range(first, end + 1):
            running[second] = running.get(second, 0) + 1
    peak = max(per_second, key=per_second.get, default=0)
    return {
        "duration": duration,
        "completed": len(done),
        "failed": len(outputs) - len(done),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(done) / duration,
        "request_goodput": None,
        "output_throughput": total_out / duration,
        "total_token_throughput": (total_in + total_out) / duration,
        "max_output_tokens_per_s": float(per_second.get(peak, 0)),
        "max_concurrent_requests": running.get(peak, 0),
        "rtfx": 0.0,
        "latencies": [o["latency"] for o in outputs],
        **percentiles("ttft", [o["ttft"] for o in done]),
        **percentiles("tpot", tpots),
        **percentiles("itl", [gap for o in done for gap in o["itl"]]),
    }


def bench(argv: list[str]) -> int:
    """`vllm bench serve`: the workload at one concurrency, its result printed and saved."""
    argv = ["--help" if arg.startswith("--help=") else arg for arg in argv]  # vLLM's --help=all
    args = bench_parser().parse_args(argv)
    if args.model is None:
        log("the stand-in's bench needs --model (vLLM's /v1/models lookup sends no key)")
        return 1
    tokenizer = args.tokenizer or args.model
    if not any((Path(tokenizer) / name).is_file() for name in TOKENIZER_FILES):
        # vLLM's client loads it (get_tokenizer, AutoTokenizer) before any request, and a
        # folder that is not a tokenizer ends the run with transformers' OSError, exit 1
        log(f"OSError: Can't load tokenizer for '{tokenizer}': not a directory containing "
            f"a tokenizer ({', '.join(TOKENIZER_FILES)})")  # fmt: skip
        return 1
    prompts = bench_prompts(args)
    print(f"{STANDIN}: vllm bench serve measures the stand-in's HTTP path, not a model", flush=True)
    concurrency = args.max_concurrency or len(prompts)
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(lambda p: bench_request(args, p), prompts[: args.num_warmups]))
        started = time.perf_counter()
        outputs = list(pool.map(lambda p: bench_request(args, p), prompts))
        duration = time.perf_counter() - started
    metrics = bench_metrics(outputs, duration, started)
    print("{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="))
    for label, field in (
        ("Successful requests:", "completed"),
        ("Failed requests:", "failed"),
        ("Output token throughput (tok/s):", "output_throughput"),
        ("Median TTFT (ms):", "median_ttft_ms"),
    ):
        print(f"{label:<40} {metrics[field]:<10.2f}")
    print("=" * 50, flush=True)
    for output in outputs:
        if output["error"]:
            log(f"request failed: {output['error']}")
    if args.save_result:
        save_result(args, metrics)
    return 0


def save_result(args: argparse.Namespace, metrics: dict) -> None:
    """serve.py's result JSON and compute_result_filename."""
    now = datetime.now().strftime("%Y%m%d-%H%M%S")
    label = args.label or args.backend
    result = {
        "date": now,
        "endpoint_type": args.backend,
        "backend": args.backend,
        "label": args.label,
        "model_id": args.model,
        "tokenizer_id": args.tokenizer or args.model,
        "num_prompts": args.num_prompts,
    }
    for item in args.metadata or []:
        key, _, value = item.partition("=")
        result[key.strip()] = value.strip()
    rate = args.request_rate
    result.update(
        request_rate=rate if rate < float("inf") else "inf",
        burstiness=args.burstiness,
        max_concurrency=args.max_concurrency,
    )
    result.update(metrics)
    level = f"-concurrency{args.max_concurrency}" if args.max_concurrency is not None else ""
    name = args.result_filename or (
        f"{label}-{rate}qps{level}-{args.model.rstrip('/').split('/')[-1]}-{now}.json"
    )
    if args.result_dir:
        os.makedirs(args.result_dir, exist_ok=True)
        name = os.path.join(args.result_dir, name)
    with open(name, "w", encoding="utf-8") as out:
        json.dump(result, out)
