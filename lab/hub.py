"""The lab's stand-in for the Hugging Face Hub: a small model laid out in a node's cache exactly as
huggingface_hub 1.x keeps a download (models--ORG--NAME/{blobs,refs/main,snapshots/SHA/}), so that
the real `hf download` with HF_HUB_OFFLINE=1 resolves it and vLLM's stand-in finds it by id.

The files are a few KB: a model's configuration, a word-level tokenizer and a valid safetensors
file with no tensors (weights are what no lab can hold). A second model, SPARSE, has weight files
of SPARSE_FILE_BYTES each in apparent size and a few KB on disk (sparse files): the memory budget
must refuse it (docs/roles/serve.md), the lab never loads it."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path

from lab.hubserver import Repo

MODEL = "facebook/opt-125m"
COMMIT = "27dcfa74d334bc871f3234de431e71c6eeba5dd6"  # the lab's own: no network, nothing to match
# "280 GB" in 8 files of 35 GB: 140 GB per node at TP 2, more than vLLM may take on any node
# (kernel.gtt_gib at most 124 x gpu_memory_utilization at most 1.0)
SPARSE = "halo-lab/sparse-280b"
SPARSE_FILES = 8
SPARSE_FILE_BYTES = 35 * 10**9
# served by the lab's hub (lab/hubserver.py), in no node's cache: what `serve.download` fetches
FETCHED = "halo-lab/fetch-once"
FETCHED_COMMIT = "5a1f0e9c3d7b2a4e6f8091a2b3c4d5e6f7a8b9c0"
FETCHED_WEIGHT_BYTES = 16 * 2**20  # incompressible: what crosses a link is what is counted


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
        "tokenizer.json": json.dumps(tokenizer(), indent=1).encode() + b"\n",
    }


def tokenizer() -> dict:
    """A word-level tokenizer in the `tokenizers` library's format, one token a word as the
    stand-in counts them: what `vllm bench serve --tokenizer SNAPSHOT` must find in the snapshot
    (the stand-in's client refuses a folder without one, as vLLM's does)."""
    vocab = {word: i for i, word in enumerate(["<unk>", "stand", "in", "lab", "token", "not",
                                               "a", "model", "word"])}  # fmt: skip
    return {
        "version": "1.0",
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"},
    }


def fetched_files() -> dict[str, bytes]:
    """FETCHED's files: the small model's configuration and one real weight file of
    FETCHED_WEIGHT_BYTES (a uint8 tensor of pseudo-random bytes, the same on every run)."""
    data = hashlib.shake_256(FETCHED.encode()).digest(FETCHED_WEIGHT_BYTES)
    tensor = {"dtype": "U8", "shape": [len(data)], "data_offsets": [0, len(data)]}
    header = json.dumps({"__metadata__": {"format": "pt"}, "weight": tensor}).encode()
    weights = struct.pack("<Q", len(header)) + header + data
    return {**files(), "model.safetensors": weights}


def hub_repos() -> dict[str, Repo]:
    """What the lab's hub serves."""
    return {FETCHED: Repo(FETCHED_COMMIT, fetched_files())}


def sparse_files() -> dict[str, int]:
    """SPARSE's weight files: name -> apparent size."""
    return {
        f"model-{i:05d}-of-{SPARSE_FILES:05d}.safetensors": SPARSE_FILE_BYTES
        for i in range(1, SPARSE_FILES + 1)
    }


def seed(cache: Path, uid: int, gid: int, model: str = MODEL) -> Path:
    """Lay `model` out in `cache` (a node's ~/.cache/huggingface), owned by the cluster user;
    return its snapshot folder. SPARSE gets its sparse weight files besides the configuration."""
    repo = cache / "hub" / f"models--{model.replace('/', '--')}"
    snapshot = repo / "snapshots" / COMMIT
    for folder in (repo / "blobs", repo / "refs", snapshot):
        folder.mkdir(parents=True, exist_ok=True)
    contents = {k: v for k, v in files().items() if model != SPARSE or k != "model.safetensors"}
    for name, data in contents.items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        _link(snapshot, name, blob)
    for name, size in (sparse_files() if model == SPARSE else {}).items():
        # named as huggingface_hub names an LFS blob (its sha256), here of name and size: hashing
        # 35 GB of zeros per file would take minutes and no hub is there to compare
        blob = repo / "blobs" / hashlib.sha256(f"{name} {size}".encode()).hexdigest()
        with open(blob, "wb") as out:
            out.truncate(size)  # a hole: no block on disk
        _link(snapshot, name, blob)
    # huggingface_hub reads refs/main without stripping it: no trailing newline
    (repo / "refs" / "main").write_text(COMMIT)
    for path in (cache, *cache.rglob("*")):
        os.lchown(path, uid, gid)
    return snapshot


def _link(snapshot: Path, name: str, blob: Path) -> None:
    link = snapshot / name
    if not link.is_symlink():
        link.symlink_to(f"../../blobs/{blob.name}")
