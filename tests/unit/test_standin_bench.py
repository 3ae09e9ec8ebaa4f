"""The lab's stand-in `vllm bench serve` against the stand-in's own HTTP server, both run here on
127.0.0.1 (no lab, no Ray: the server's handler is the one `vllm serve` serves with): it streams
a token per chunk, the client measures that path and writes vLLM's result file and fields."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from lab import hub
from tests.unit.helpers_standin import KEY, STANDIN, load, one_rank

# the result fields vllm/benchmarks/serve.py writes without --save-detailed (main_async, benchmark)
FIELDS = {
    "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
    "request_rate", "burstiness", "max_concurrency", "duration", "completed", "failed",
    "total_input_tokens", "total_output_tokens", "request_throughput", "request_goodput",
    "output_throughput", "total_token_throughput", "max_output_tokens_per_s",
    "max_concurrent_requests", "rtfx",
    *(f"{s}_{m}_ms" for s in ("mean", "median", "std", "p99") for m in ("ttft", "tpot", "itl")),
}  # fmt: skip


def server(module: ModuleType) -> Iterator[str]:
    args = module.parse(["serve", "/models/opt", "--served-model-name", "opt", "--api-key", KEY])
    core = module.engine(args, one_rank)
    http = module.ThreadingHTTPServer(("127.0.0.1", 0), module.handler(args, core))
    threading.Thread(target=http.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{http.server_address[1]}"
    http.shutdown()
    http.server_close()


@pytest.fixture(scope="module")
def standin() -> ModuleType:
    return load("standin_vllm")


@pytest.fixture
def url(standin) -> Iterator[str]:
    yield from server(standin)


def tokenizer_folder(folder: Path) -> Path:
    """A folder holding the lab model's tokenizer, as its snapshot does (lab/hub.py)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.json").write_bytes(hub.files()["tokenizer.json"])
    return folder


def bench_serve(
    module: ModuleType, url: str, folder: Path, name: str, level: int = 4, output: int = 6
) -> dict:
    tokenizer = str(tokenizer_folder(folder / "tokenizer"))
    argv = [
        "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions",
        "--model", "/models/opt", "--served-model-name", "opt", "--tokenizer", tokenizer,
        "--dataset-name", "random", "--random-input-len", "12", "--random-output-len", str(output),
        "--num-prompts", "8", "--max-concurrency", str(level), "--seed", "0",
        "--num-warmups", "1", "--temperature", "0", "--save-result",
        "--result-dir", str(folder), "--result-filename", name, "--metadata", "halo_run=r1",
    ]  # fmt: skip
    assert module.bench(argv) == 0
    return json.loads((folder / name).read_text())


def test_a_run_measures_the_streamed_path_and_writes_vllms_fields(
    standin, url, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    result = bench_serve(standin, url, tmp_path, "r1-c4.json")
    assert set(result) >= FIELDS, FIELDS - set(result)
    assert (result["completed"], result["failed"]) == (8, 0)
    assert (result["total_input_tokens"], result["total_output_tokens"]) == (8 * 12, 8 * 6)
    assert result["max_concurrency"] == 4 and result["request_rate"] == "inf"
    assert result["halo_run"] == "r1" and result["model_id"] == "/models/opt"
    # six tokens of TOKEN_SECONDS each: the first arrives after one, five gaps follow
    assert result["median_ttft_ms"] >= standin.TOKEN_SECONDS * 1000
    assert result["median_itl_ms"] >= standin.TOKEN_SECONDS * 1000
    assert result["output_throughput"] == pytest.approx(48 / result["duration"])


def test_without_the_key_every_request_fails_and_is_counted(
    standin, url, tmp_path, monkeypatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = bench_serve(standin, url, tmp_path, "nokey.json")
    assert (result["completed"], result["failed"], result["output_throughput"]) == (0, 8, 0)


def test_the_default_file_name_is_vllms(standin, url, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    model = str(tokenizer_folder(tmp_path / "models" / "opt"))  # the tokenizer is the model's
    out = tmp_path / "out"
    argv = ["--base-url", url, "--model", model, "--served-model-name", "opt",
            "--random-input-len", "4", "--random-output-len", "2", "--num-prompts", "2",
            "--max-concurrency", "1", "--save-result", "--result-dir", str(out)]  # fmt: skip
    assert standin.bench(argv) == 0
    (found,) = out.iterdir()
    assert found.name.startswith("openai-infqps-concurrency1-opt-") and found.suffix == ".json"


def test_help_all_lists_the_flags_the_tool_passes(standin, capsys) -> None:
    with pytest.raises(SystemExit):
        standin.bench(["--help=all"])
    shown = capsys.readouterr().out
    for flag in ("--max-concurrency", "--seed", "--num-warmups", "--result-filename"):
        assert flag in shown


def test_the_slow_build_streams_ten_times_slower(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    fast = load("standin_fast")
    monkeypatch.setenv("HALO_STANDIN_FAULT", "slow")
    slow = load("standin_slow")
    results = {}
    for name, module in (("fast", fast), ("slow", slow)):
        for address in server(module):
            # 20 tokens each: the slow build's 0.4 s a request outweighs a loaded core's delays
            results[name] = bench_serve(module, address, tmp_path, f"{name}.json", output=20)
    assert slow.TOKEN_SECONDS == 10 * fast.TOKEN_SECONDS
    assert results["slow"]["output_throughput"] < 0.5 * results["fast"]["output_throughput"]


def test_the_tools_level_script_passes_the_key_by_environment_and_prints_the_result(
    standin, url, tmp_path, monkeypatch
) -> None:
    """halo-cluster's script for one level, run by sh with the stand-in as `vllm` (as in the
    lab's image, without podman): the key only in VLLM_API_KEY, the result on stdout, the file
    removed."""
    from halo_cluster.tools.bench import run
    from tests.unit.helpers_bench import cluster, head

    wrapper = tmp_path / "bin" / "vllm"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {STANDIN} "$@"\n')
    wrapper.chmod(0o755)
    argv = run.bench_argv(
        cluster(
            tmp_path, "bench: {input_len: 4, output_len: 3, num_prompts: 4, concurrency: [1, 2]}\n"
        ),
        head(),
        "t1",
        1,
    )
    argv[argv.index("--base-url") + 1] = url
    argv[argv.index("--tokenizer") + 1] = str(tokenizer_folder(tmp_path / "snapshot"))
    argv[argv.index("--served-model-name") + 1] = "opt"  # the test server's name
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{os.environ['PATH']}")
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    script = run.level_script(argv, "t1", 1, 120)
    assert KEY not in script
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["completed"], result["failed"], result["halo_run"]) == (4, 0, "t1")
    assert not (Path(run.RESULT_DIR) / "t1-c1.json").exists()


def post(url: str, path: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        url + path,
        json.dumps(body).encode(),
        {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
def test_a_request_for_another_model_gets_vllms_404(url, path) -> None:
    status, body = post(url, path, {"model": "gpt-4", "prompt": "ping", "max_tokens": 2})
    assert (status, body) == (404, {"error": {
        "message": "The model `gpt-4` does not exist.", "type": "NotFoundError",
        "param": "model", "code": 404,
    }})  # fmt: skip


def test_the_served_name_or_no_model_is_served(url) -> None:
    for body in ({"model": "opt", "prompt": "ping"}, {"prompt": "ping"}):
        status, answer = post(url, "/v1/completions", {**body, "max_tokens": 2})
        assert status == 200 and answer["model"] == "opt"


@pytest.mark.parametrize("flag", ["--tokenizer", "--model"])
def test_bench_refuses_a_folder_that_is_not_a_tokenizer(
    standin, url, tmp_path, capsys, flag
) -> None:
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    (snapshot / "config.json").write_text("{}")  # a model's config, no tokenizer
    argv = ["--base-url", url, "--model", str(snapshot), "--num-prompts", "2",
            "--save-result", "--result-dir", str(tmp_path / "out")]  # fmt: skip
    if flag == "--tokenizer":
        argv[argv.index("--model") + 1] = str(tokenizer_folder(tmp_path / "model"))
        argv += ["--tokenizer", str(snapshot)]
    assert standin.bench(argv) == 1
    assert f"OSError: Can't load tokenizer for '{snapshot}'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # no request was sent, no result written
