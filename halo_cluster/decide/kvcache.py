"""The KV cache a model needs on one node, from its config.json alone, with vLLM's arithmetic.

vLLM (v1) sizes each attention layer's cache by its spec, vllm/v1/kv_cache_interface.py:

- `AttentionSpec.real_page_size_bytes` = 2 x block_size x num_kv_heads x head_size x dtype
  size (K and V), for a block of `block_size` tokens;
- `FullAttentionSpec.max_memory_usage_bytes` = cdiv(max_model_len, block_size) x page;
- `SlidingWindowSpec.max_memory_usage_bytes` = (cdiv(min(sliding_window - 1 +
  max_num_batched_tokens, max_model_len), block_size) + 1) x page: only the window is kept;
- `MLAAttentionSpec.real_page_size_bytes` = block_size x 1 x (kv_lora_rank + qk_rope_head_dim)
  x dtype size: one latent per token, no separate K and V, the same on every TP rank.

vllm/v1/core/kv_cache_utils.py `check_enough_kv_cache_memory` refuses to start when the sum of
every layer's `max_memory_usage_bytes` at max_model_len is more than the memory left for the
cache, and `estimate_max_model_len` binary-searches the largest length whose sum fits: the same
here, per rank. KV heads per TP rank: max(1, kv_heads // tp) (vLLM replicates a KV head when TP
is larger than their count); the layers a PP stage holds as vllm/distributed/utils.py
`get_pp_indices` splits them (the remainder to the stages before the last).
"""

from __future__ import annotations

from dataclasses import dataclass

BLOCK_SIZE = 16  # vLLM's CacheConfig.block_size default on CUDA and ROCm
# vLLM's default max_num_batched_tokens for the OpenAI server on a GPU with 70 GiB or more
# (vllm/engine/arg_utils.py EngineArgs.get_batch_defaults): the Strix Halo's GTT is; only the
# sliding-window layers read it
MAX_NUM_BATCHED_TOKENS = 8192
# bytes per element; `auto` is the model's dtype, and vLLM's `--dtype auto` serves a float32
# checkpoint in 16 bits, so every unquantized cache is 2 bytes; fp8 caches 1
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 2, "float": 2}
FULL, SLIDING = "full", "sliding"


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class ModelConfigError(ValueError):
    """config.json lacks or mistypes a field the estimate needs: the message names it."""


@dataclass(frozen=True)
class Attention:
    """What the cache depends on: each layer's kind, the KV heads, the head size, the dtype."""

    layers: tuple[str, ...]  # FULL or SLIDING, one per decoder layer
    kv_heads: int
    head_size: int  # MLA: kv_lora_rank + qk_rope_head_dim
    mla: bool
    sliding_window: int | None
    dtype_bytes: int
    max_position: int  # the model's own max_model_len (vLLM's default)
    dtype: str


def _int(config: dict, key: str, default: int | None = None) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ModelConfigError(f"config.json: {key} must be a positive integer, not {value!r}")
    return value


def _layer_kinds(text: dict, layers: int) -> tuple[str, ...]:
    """Each layer's kind: `layer_types` (transformers' hybrid models: gpt-oss, gemma 3 in newer
    configs), else gemma 3's `sliding_window_pattern` (every Nth layer full), gemma 2's
    alternation (even layers sliding), else all sliding when `sliding_window` is set and not
    switched off by `use_sliding_window: false` (Qwen 2 writes a window it does not use)."""
    types = text.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers:
            raise ModelConfigError(f"config.json: layer_types must list {layers} layers")
        return tuple(SLIDING if t == "sliding_attention" else FULL for t in types)
    if not text.get("sliding_window") or text.get("use_sliding_window") is False:
        return (FULL,) * layers
    # gemma 3's text_config often leaves the pattern to transformers' default, 6
    pattern = text.get(
        "sliding_window_pattern", 6 if text.get("model_type") == "gemma3_text" else 0
    )
    if isinstance(pattern, int) and pattern > 0:
        return tuple(FULL if (i + 1) % pattern == 0 else SLIDING for i in range(layers))
    if text.get("model_type") == "gemma2":
        return tuple(SLIDING if i % 2 == 0 else FULL for i in range(layers))
    return (SLIDING,) * layers


def attention(config: dict, kv_cache_dtype: str = "auto") -> Attention:
    """The attention of config.json (a multimodal model's own under `text_config`)."""
    text = config.get("text_config") or config
    layers = _int(text, "num_hidden_layers")
    heads = _int(text, "num_attention_heads")
    dtype = str(text.get("torch_dtype") or text.get("dtype") or config.get("torch_dtype") or "")
    dtype = dtype or "bfloat16"  # none written (gpt-oss): vLLM serves it in bfloat16
    if kv_cache_dtype.startswith("fp8"):
        size = 1
    elif kv_cache_dtype == "auto":
        if dtype not in DTYPE_BYTES:
            raise ModelConfigError(f"config.json: torch_dtype {dtype!r} is not a known dtype")
        size = DTYPE_BYTES[dtype]
    else:
        size = DTYPE_BYTES.get(kv_cache_dtype, 2)
    mla = text.get("kv_lora_rank") is not None
    if mla:
        kv_heads = 1
        head_size = _int(text, "kv_lora_rank") + _int(text, "qk_rope_head_dim")
    else:
        kv_heads = _int(text, "num_key_value_heads", heads)
        head_size = _int(text, "head_dim", _int(text, "hidden_size") // heads)
    kinds = _layer_kinds(text, layers)
    window = _int(text, "sliding_window") if SLIDING in kinds else None
    return Attention(
        kinds,
        kv_heads,
        head_size,
        mla,
        window,
        size,
        _int(text, "max_position_embeddings", 0) if "max_position_embeddings" in text else 0,
        "fp8" if size == 1 else dtype,
    )


def pp_layers(layers: int, pp: int) -> list[range]:
    """The layers of each PP stage, as vLLM's get_pp_indices splits them."""
    parts = [layers // pp] * pp
    for i in range(layers % pp):
        parts[-(i + 2)] += 1
    starts = [sum(parts[:i]) for i in range(pp)]
    return [range(s, s + n) for s, n in zip(starts, parts, strict=True)]


def page_bytes(att: Attention, tp: int) -> int:
    """One layer's page of BLOCK_SIZE tokens on one TP rank."""
    if att.mla:
        return BLOCK_SIZE * att.head_size * att.dtype_bytes
    return 2 * BLOCK_SIZE * max(1, att.kv_heads // tp) * att.head_size * att.dtype_bytes


def per_token(att: Attention, tp: int, pp: int) -> int:
    """The cache one token takes on the fullest node, as if every layer were full attention."""
    stage = max(len(s) for s in pp_layers(len(att.layers), pp))
    return page_bytes(att, tp) // BLOCK_SIZE * stage


def needed(att: Attention, tp: int, pp: int, max_model_len: int) -> int:
    """vLLM's max_memory_usage_bytes summed over the layers of the fullest PP stage: what one
    sequence of max_model_len takes there."""
    page = page_bytes(att, tp)
    full = cdiv(max_model_len, BLOCK_SIZE) * page
    sliding = 0
    if att.sliding_window:
        tokens = min(att.sliding_window - 1 + MAX_NUM_BATCHED_TOKENS, max_model_len)
        sliding = (cdiv(tokens, BLOCK_SIZE) + 1) * page
    return max(
        sum(full if att.layers[i] == FULL else sliding for i in stage)
        for stage in pp_layers(len(att.layers), pp)
    )


def largest_len(att: Attention, tp: int, pp: int, available: int, concurrency: int) -> int:
    """The largest max_model_len (at most the model's own) whose `concurrency` sequences fit in
    `available` bytes: estimate_max_model_len's binary search; 0 when not even one token does."""
    ceiling = att.max_position or 1 << 24
    if concurrency * needed(att, tp, pp, 1) > available:
        return 0
    low, high = 1, ceiling
    while low < high:
        mid = (low + high + 1) // 2
        if concurrency * needed(att, tp, pp, mid) <= available:
            low = mid
        else:
            high = mid - 1
    return low
