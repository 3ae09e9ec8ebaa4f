"""The deploy's fit estimate (roles/serve/fit.py), planned: the head's reading of serve.model's
config.json (Qwen/Qwen3-32B's, recorded: tests/plan/fixtures/SOURCES.md) and its index's
total_size, judged by `halo-cluster fit`'s own estimate before any role runs. A model that fits
deploys; one that cannot fit refuses every node before any operation, in one line with the
numbers; a config.json that could not be read is a WARN and the deploy goes on."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from halo_cluster.decide.budget import GIB
from tests.plan.nodes import plan_cluster, refusal, serve_cluster
from tests.recorded import memory_output

START = "Cluster services | Start halo-vllm"
MODEL = "Qwen/Qwen3-32B"
CONFIG = Path(__file__).parent / "fixtures" / "models" / "qwen3-32b.config.json"
SNAPSHOT = f"/home/vllm/.cache/huggingface/hub/models--Qwen--Qwen3-32B/snapshots/{'b' * 40}"
# 32.8 billion parameters (the model card's) x 2 bytes of bfloat16: an illustrative total_size,
# not the hub's recorded index (none is recorded here)
TOTAL = 65_600_000_000
# one token's KV cache per node at TP 2: 64 layers x K and V x 8 // 2 KV heads x 128 x 2 bytes
PER_TOKEN = 64 * 2 * 4 * 128 * 2


@pytest.fixture(autouse=True)
def _log(caplog):
    caplog.set_level(logging.INFO)


def cached_config(total: int | None = TOTAL) -> list[str]:
    """ModelConfig's output for a snapshot in the head's cache with config.json and the index."""
    lines = [f"source {SNAPSHOT}", "config-begin", *CONFIG.read_text().splitlines(), "config-end"]
    return lines + ([f"total_size {total}"] if total else [])


def plan(top: str = "", max_model_len: int = 8192, model_config=None, serve: str = ""):
    cluster = serve_cluster(
        serve=", object_store_mib: 8192" + serve,
        top=top,
        model=MODEL,
        max_model_len=max_model_len,
    )
    memory = memory_output([TOTAL // 2, TOTAL // 2], folder=SNAPSHOT)
    config = cached_config() if model_config is None else model_config
    return cluster, plan_cluster(cluster, memory=memory, model_config=config)


def preflight_line(caplog) -> str:
    return next(line for line in caplog.text.splitlines() if "preflight model fit:" in line)


def test_a_model_that_fits_deploys_and_says_its_numbers(caplog) -> None:
    _, result = plan()
    assert START in result.names("halo1") and result.refused == {}
    line = preflight_line(caplog)
    # TP 2: 30.5 GiB of weights per node, 8192 tokens x 128 KiB = 1.0 GiB of KV cache
    assert "model fit: OK (serve.model 'Qwen/Qwen3-32B' fits at TP 2 x PP 1" in line
    assert "weights 30.5 GiB per node, KV cache 1.0 GiB for 8192 tokens" in line
    assert "largest max_model_len 40960" in line and f"config.json from {SNAPSHOT}" in line


def test_weights_too_large_refuse_every_node_before_any_operation() -> None:
    cluster, result = plan(top="kernel: {gtt_gib: 32}\n")
    assert set(result.refused) == {"halo1", "halo2"}
    line = refusal(result, "halo1")  # no operation at all: nothing changed, nothing downloaded
    assert refusal(result, "halo2") == line and "\n" not in line
    assert line == (
        f"{cluster.source}: serve.model: 'Qwen/Qwen3-32B' cannot fit at TP 2 x PP 1: weights "
        "30.5 GiB per node, KV cache 1.0 GiB for max_model_len 8192 x concurrency 1, vLLM may "
        "take 28.8 GiB per node (the weights are more than 90% of vLLM's share); the largest "
        "max_model_len that fits: 0; the smallest TP x PP that fits: none on 2 node(s); nothing "
        "was changed or downloaded (halo-cluster fit 'Qwen/Qwen3-32B'; "
        f"{line.rsplit('; ', 1)[1]}"
    )
    assert line.endswith("models.md)")
    for node in ("halo1", "halo2"):
        assert not any("hf download" in c or "rsync -a" in c for c in result.commands(node))


def test_a_kv_cache_too_large_names_the_largest_max_model_len_that_fits() -> None:
    _, result = plan(top="kernel: {gtt_gib: 38}\n", max_model_len=32768)
    line = refusal(result, "halo1")
    left = int(38 * GIB * 0.9) - TOTAL // 2
    largest = left // (PER_TOKEN * 16) * 16  # whole blocks of 16 tokens (vLLM's block_size)
    assert 0 < largest < 32768
    assert "KV cache 4.0 GiB for max_model_len 32768 x concurrency 1" in line
    assert f"the KV cache is more than the {left / GIB:.1f} GiB the weights leave" in line
    assert f"the largest max_model_len that fits: {largest};" in line
    assert "the smallest TP x PP that fits: none on 2 node(s)" in line


def test_a_config_not_read_is_a_warning_and_the_deploy_goes_on(caplog) -> None:
    failed = [
        f"source https://huggingface.co/{MODEL}",
        "config-begin",
        "error config.json: curl exit status 6",
        "",
        "config-end",
        "tree-begin",
        "error file list: curl exit status 6",
        "",
        "tree-end",
    ]
    _, result = plan(model_config=failed)
    assert START in result.names("halo1") and result.refused == {}
    line = preflight_line(caplog)
    assert (
        "model fit: WARN (serve.model 'Qwen/Qwen3-32B': could not estimate whether it fits "
        f"(https://huggingface.co/{MODEL}: config.json: curl exit status 6); the deploy goes on"
    ) in line
    assert "WARNING" in line or "WARN" in line


def test_offline_without_the_model_in_the_cache_is_a_warning(caplog) -> None:
    _, result = plan(model_config=[], serve=', env: {HF_HUB_OFFLINE: "1"}')
    assert START in result.names("halo1")
    assert "HF_HUB_OFFLINE keeps the hub out" in preflight_line(caplog)


def test_no_index_weighs_the_hubs_file_list(caplog) -> None:
    """Without total_size, the sizes of the top-level *.safetensors in the hub's file list."""
    tree = [
        {"type": "file", "path": f"model-0000{i}-of-00002.safetensors", "size": TOTAL // 2}
        for i in (1, 2)
    ] + [{"type": "file", "path": "sub/extra.safetensors", "size": 10**12}]
    answer = [
        f"source https://huggingface.co/{MODEL}",
        "config-begin",
        json.dumps(json.loads(CONFIG.read_text())),
        "config-end",
        "tree-begin",
        json.dumps(tree),
        "tree-end",
    ]
    _, result = plan(model_config=answer)
    assert START in result.names("halo1")
    assert "weights 30.5 GiB per node" in preflight_line(caplog)
