"""The lab's seeded models (lab/hub.py), laid out here as on a lab node: the small one as before,
the sparse one "280 GB" in a few KB of disk, as the memory budget's fact reads them."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from halo_cluster.node.memory import memory_command, memory_process
from lab import hub


def test_the_sparse_model_weighs_280_gb_in_a_few_kb(tmp_path: Path) -> None:
    cache = tmp_path / ".cache" / "huggingface"
    small = hub.seed(cache, os.getuid(), os.getgid())
    sparse = hub.seed(cache, os.getuid(), os.getgid(), hub.SPARSE)
    assert sorted(p.name for p in small.iterdir()) == [
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
    ]
    names = sorted(p.name for p in sparse.glob("*.safetensors"))
    assert names == [f"model-0000{i}-of-00008.safetensors" for i in range(1, 9)]
    assert all(os.stat(p).st_size == 35 * 10**9 for p in sparse.glob("*.safetensors"))
    on_disk = sum(os.stat(p).st_blocks * 512 for p in (cache / "hub").rglob("*") if p.is_file())
    assert on_disk < 10**6
    command = memory_command("vllm", hub.SPARSE, shlex.quote(str(tmp_path)))
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True).stdout
    assert sum(memory_process(out.splitlines())["weights"]) == 280 * 10**9
    command = memory_command("vllm", hub.MODEL, shlex.quote(str(tmp_path)))
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True).stdout
    assert sum(memory_process(out.splitlines())["weights"]) < 100
