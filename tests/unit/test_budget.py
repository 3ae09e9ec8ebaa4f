"""The memory budget's decisions (decide/budget.py) and what the NodeMemory fact reads
(node/memory.py), its command run here on a cache laid out as huggingface_hub keeps it."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from halo_cluster.config.loader import load_cluster
from halo_cluster.decide import budget
from halo_cluster.decide.budget import FAIL, GIB, NOT_VERIFIED, OK, WARN, decide
from halo_cluster.node.memory import ModelWeights, NodeMemory, memory_command, memory_process
from tests.recorded import strix_halo_gtt_bytes, strix_halo_memtotal_kib
from tests.unit.configs import VALID_ROCE, write

MEMTOTAL = strix_halo_memtotal_kib()  # 122.7 GiB, from amdgpu's TTM size (tests/recorded.py)
GTT = strix_halo_gtt_bytes()  # 96 GiB, sysfs


def weigh(**over):
    args = dict(
        memtotal_kib=MEMTOTAL,
        gtt_bytes=GTT,
        gtt_source="sysfs",
        utilization=0.9,
        object_store_mib=8192,
        weights_bytes=30 * GIB,
        gpus=2,
        parallelism="TP 2 x PP 1",
        model="org/model",
    )
    return decide("halo1", **{**args, **over})


def test_what_fits_is_ok_and_adds_up() -> None:
    found = weigh()
    assert found.status == OK, found
    assert found.vllm == int(96 * GIB * 0.9)
    assert found.object_store == 8 * GIB and found.reserve == budget.RESERVE_GIB * GIB
    assert found.total == found.vllm + found.object_store + found.reserve
    assert found.weights == 15 * GIB  # 30 GiB over TP 2 x PP 1
    assert found.row()[-1] == OK and found.row()[6] == "100.4 GiB (82%)"


def test_weights_over_the_share_of_vllm_are_refused_with_the_fix() -> None:
    # 86.4 GiB for vLLM: the weights may take 90% of it, 77.76 GiB per node
    assert weigh(weights_bytes=int(2 * 77.7 * GIB)).status == OK
    found = weigh(weights_bytes=int(2 * 77.8 * GIB))
    assert found.status == FAIL
    (problem,) = found.problems
    assert "weights 77.8 GiB on this node (155.6 GiB / TP 2 x PP 1)" in problem
    assert "more than 90% of what vLLM may take, 86.4 GiB (GTT 96.0 GiB x 0.9)" in problem
    assert "at least 3 nodes" in problem and "smaller (quantized) model" in problem
    assert weigh(weights_bytes=int(2 * 77.8 * GIB), gpus=4, parallelism="TP 2 x PP 2").status == OK


def test_an_explicit_object_store_over_memtotal_is_refused() -> None:
    found = weigh(object_store_mib=40960)
    assert found.status == FAIL
    assert "is 9.7 GiB more than MemTotal 122.7 GiB" in found.problems[0]
    assert "gpu_memory_utilization to at most 0.79" in found.problems[0]
    assert "serve.object_store_mib to at most 31015" in found.problems[0]
    assert weigh(object_store_mib=31015).status == WARN  # fits, above 90% of MemTotal


def test_vllm_alone_over_memtotal_is_refused_even_with_rays_default() -> None:
    found = weigh(gtt_bytes=124 * GIB, utilization=0.95, object_store_mib=None)
    assert found.status == FAIL
    assert "Ray's default, 30%" in found.problems[0]


def test_rays_default_overflowing_is_a_warning_naming_the_value_that_fits() -> None:
    found = weigh(object_store_mib=None)
    assert found.object_store == int(MEMTOTAL * 1024 * 0.3)
    assert found.status == WARN
    assert "set serve.object_store_mib to at most 31015" in found.notes[0]


def test_nearly_full_warns() -> None:
    # 96 x 0.9 + 14 + 6 = 106.4 GiB of 122.7: 87%, OK; + 20 GiB store: 92%, a warning
    assert weigh(object_store_mib=14 * 1024).status == OK
    found = weigh(object_store_mib=20 * 1024)
    assert found.status == WARN and found.notes[0].startswith("nearly full")


def test_a_container_is_not_verified_but_its_weights_still_count() -> None:
    found = weigh(hidden=True)
    assert found.status == NOT_VERIFIED
    assert "NOT VERIFIED: a container sees its host's MemTotal" in found.notes[0]
    assert weigh(hidden=True, weights_bytes=280 * 10**9).status == FAIL


def test_weights_not_found_are_not_checked() -> None:
    found = weigh(weights_bytes=None)
    assert found.status == WARN and found.row()[7] == "not found"
    assert "weights not checked" in found.notes[0]


@pytest.mark.parametrize(
    ("cmdline", "size"),
    [
        ("ro amdgpu.gttsize=98304 ttm.pages_limit=25165824", 96 * GIB),
        ("ro ttm.pages_limit=25165824", 96 * GIB),
        ("ro amdgpu.gttsize=128000 amdttm.pages_limit=32768000", 128000 * 1024**2),
        ("ro amdgpu.gttsize=131072 ttm.pages_limit=25165824", 96 * GIB),  # TTM limits
        ("ro quiet", 0),
    ],
)
def test_gtt_from_the_kernel_arguments(cmdline: str, size: int) -> None:
    assert budget.gtt_from_cmdline(cmdline) == size


def run(command: str) -> list[str]:
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True).stdout.splitlines()


def sparse(path: Path, size: int) -> None:
    with open(path, "wb") as out:
        out.truncate(size)


def test_the_fact_reads_a_snapshots_apparent_sizes_through_its_links(tmp_path: Path) -> None:
    repo = tmp_path / ".cache/huggingface/hub/models--halo-lab--sparse"
    snapshot = repo / "snapshots/abc123"
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs/main").write_text("abc123")
    for i in (1, 2):
        sparse(repo / "blobs" / f"b{i}", 35 * 10**9)
        (snapshot / f"model-0000{i}-of-00002.safetensors").symlink_to(f"../../blobs/b{i}")
    (snapshot / "config.json").write_text("{}")
    assert os.stat(repo / "blobs/b1").st_blocks * 512 < 10**6  # sparse: nothing on disk
    found = memory_process(
        run(memory_command("vllm", "halo-lab/sparse", shlex.quote(str(tmp_path))))
    )
    assert found["dir"] == str(snapshot)
    assert found["weights"] == [35 * 10**9, 35 * 10**9]
    assert found["memtotal_kib"] > 0 and found["cmdline"]


def test_the_fact_without_the_model_or_with_a_path(tmp_path: Path) -> None:
    home = shlex.quote(str(tmp_path))
    assert memory_process(run(memory_command("vllm", "org/absent", home)))["dir"] is None
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo/snapshots").mkdir()  # refs/main missing: no snapshot
    sparse(tmp_path / "model.safetensors", 1000)
    found = memory_process(run(memory_command("vllm", str(tmp_path))))
    assert found["dir"] == str(tmp_path) and found["weights"] == [1000]
    assert memory_process(run(memory_command("vllm", None)))["weights"] == []


def test_the_fact_parses_recorded_lines() -> None:
    found = memory_process(
        ["virt none", f"memtotal {MEMTOTAL}", f"gtt {GTT}", "gtt 0", "cmdline ro",
         "dir /m", "weights 5", "weights 7"]
    )  # fmt: skip
    assert found == {
        "virt": "none",
        "memtotal_kib": 128648424,
        "gtt_bytes": 103079215104,
        "cmdline": "ro",
        "dir": "/m",
        "weights": [5, 7],
    }


def test_each_fact_reads_its_own_half_of_the_node(tmp_path: Path) -> None:
    """NodeMemory (MemTotal: the preflight's and the budget's one read of it) and ModelWeights,
    each run by a real shell, give what the combined command of `make status` gives."""
    sparse(tmp_path / "model.safetensors", 1000)
    memory = NodeMemory().process(run(NodeMemory().command()))
    weights = ModelWeights().process(run(ModelWeights().command("vllm", str(tmp_path))))
    both = memory_process(run(memory_command("vllm", str(tmp_path))))
    assert memory["memtotal_kib"] > 0 and memory["cmdline"]
    assert weights == {"dir": str(tmp_path), "weights": [1000]}
    assert {**memory, **weights} == both
    assert ModelWeights().process(run(ModelWeights().command("vllm", None))) == {
        "dir": None,
        "weights": [],
    }


def test_the_kernel_roles_gtt_is_what_its_arguments_give(tmp_path: Path) -> None:
    """The budget's fallback GTT is the kernel role's derivation, the same the arguments it
    writes give when a node's /proc/cmdline is read back."""
    kernel = load_cluster(write(tmp_path, VALID_ROCE + "kernel: {gtt_gib: 96}\n")).kernel
    assert kernel.gtt_bytes == 96 * GIB == budget.gtt_from_cmdline(" ".join(kernel.args))
