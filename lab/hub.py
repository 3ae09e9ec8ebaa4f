"""The lab's stand-in for the Hugging Face Hub: a small model laid out in a node's cache exactly as
huggingface_hub 1.x keeps a download (models--ORG--NAME/{blobs,refs/main,snapshots/SHA/}), so that
the real `hf download` with HF_HUB_OFFLINE=1 resolves it and vLLM's stand-in finds it by id.

The files are a few KB: a model's configuration and a valid safetensors file with no tensors
(weights are what no lab can hold)."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path

MODEL = "facebook/opt-125m"
COMMIT = "27dcfa74d334bc871f3234de431e71c6eeba5dd6"  # the lab's own: no network, nothing to match


def files() -> dict[str, bytes]:
    config = {
        "architectures": ["OPTForCausalLM"],
        "model_type": "opt",
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "max_position_embeddings": 2048,
        "vocab_size": 50272,
        "torch_dtype": "float16",
    }
    header = json.dumps({"__metadata__": {"format": "pt"}}).encode()
    return {
        "config.json": json.dumps(config, indent=2).encode() + b"\n",
        "generation_config.json": b'{"bos_token_id": 2, "eos_token_id": 2}\n',
        "model.safetensors": struct.pack("<Q", len(header)) + header,
    }


def seed(cache: Path, uid: int, gid: int, model: str = MODEL) -> Path:
    """Lay `model` out in `cache` (a node's ~/.cache/huggingface), owned by the cluster user;
    return its snapshot folder."""
    repo = cache / "hub" / f"models--{model.replace('/', '--')}"
    snapshot = repo / "snapshots" / COMMIT
    for folder in (repo / "blobs", repo / "refs", snapshot):
        folder.mkdir(parents=True, exist_ok=True)
    for name, data in files().items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snapshot / name
        if not link.is_symlink():
            link.symlink_to(f"../../blobs/{blob.name}")
    # huggingface_hub reads refs/main without stripping it: no trailing newline
    (repo / "refs" / "main").write_text(COMMIT)
    for path in (cache, *cache.rglob("*")):
        os.lchown(path, uid, gid)
    return snapshot
