"""Where the weights come from (`serve.download`): `once` fetches on the head and copies to each
worker that lacks the head's snapshot, `every` fetches on each node, `never` (and a model given as
a path) expects them in place and refuses vLLM's start on the head, naming the node and the fix."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from halo_cluster.config.model import ConfigError
from halo_cluster.roles.serve.budget import NOT_STARTED, PAGE
from halo_cluster.roles.serve.facts import ModelFiles, complete, tree_files
from tests.plan.nodes import (
    CONFIG,
    MODEL_FILES,
    SNAPSHOT,
    converged,
    plan,
    plan_cluster,
    serve_cluster,
    user_node,
)
from tests.recorded import memory_output

DOWNLOAD = "Cluster services | Download Qwen/Qwen3-14B on this node"
COPY = "Cluster services | Copy Qwen/Qwen3-14B to halo2 over the data link"
START = "Cluster services | Start halo-vllm"


def names(result, node: str) -> list[str]:
    """The serve role's operations that do something on `node`."""
    return [
        op.name
        for op in result.ops[node]
        if op.name.startswith("Cluster services") and (op.commands or op.uploads)
    ]


def copies(result, node: str) -> list[str]:
    return [c for c in result.commands(node) if "rsync -a" in c]


def test_once_fetches_on_the_head_then_copies_to_the_worker_over_the_data_link() -> None:
    result = plan_cluster(serve_cluster())  # no node has the model
    head = names(result, "halo1")
    assert head.index(DOWNLOAD) < head.index(COPY) < head.index(START)
    assert DOWNLOAD not in names(result, "halo2") and COPY not in names(result, "halo2")
    download = next(c for c in result.commands("halo1") if "hf download" in c)
    # the services stay offline (serve.env); the download alone goes online
    assert "env HF_HUB_OFFLINE=0 hf download Qwen/Qwen3-14B" in download
    for node in ("halo1", "halo2"):
        assert "\nHF_HUB_OFFLINE=1\n" in result.uploads(node)[f"{CONFIG}/serve.env"]
    (copy,) = copies(result, "halo1")
    assert "runuser -u vllm" in copy  # as the cluster user, whose key the worker admits
    assert "vllm@192.168.100.2:.cache/huggingface/hub/models--Qwen--Qwen3-14B/" in copy
    assert "-S --partial --size-only --files-from=-" in copy and "BatchMode=yes" in copy
    # refs/main last: a worker never names a snapshot it does not hold in full
    assert copy.index("--size-only") < copy.index("-c refs/main")


WEIGH = "Cluster services | Memory budget: weigh the downloaded weights"


def weigh(tmp_path: Path, command: str, sizes: list[int]) -> subprocess.CompletedProcess:
    """The head's weigh command run by sh against a cache in `tmp_path` holding sparse weight
    files of `sizes` (apparent sizes, as the lab's sparse model)."""
    repo = tmp_path / "hub" / "models--Qwen--Qwen3-14B"
    snapshot = repo / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("a" * 40)
    for i, size in enumerate(sizes):
        with open(snapshot / f"model-{i}.safetensors", "wb") as out:
            out.truncate(size)
    local = command.replace("~vllm/.cache/huggingface", str(tmp_path))
    return subprocess.run(["sh", "-c", local], capture_output=True, text=True)


def test_the_downloaded_weights_are_weighed_before_the_copy_and_the_start(tmp_path) -> None:
    """The plan cannot weigh a model it has not fetched yet: the head weighs it right after the
    download, against the smallest share of vLLM (here GTT 96 GiB x 0.9, x 90%: 74.6 GiB per
    node of TP 2), before anything is copied or started."""
    result = plan_cluster(serve_cluster(), memory=memory_output())
    ops = names(result, "halo1")
    assert ops.index(DOWNLOAD) < ops.index(WEIGH) < ops.index(COPY) < ops.index(START)
    (command,) = next(op.commands for op in result.ops["halo1"] if op.name == WEIGH)
    limit = int(int(96 * 2**30 * 0.9) * 0.9)  # vLLM's share in whole bytes, then 90% of it
    assert f"-le {limit} ]" in command
    assert weigh(tmp_path / "fits", command, [3_700_000_000] * 8).returncode == 0
    over = weigh(tmp_path / "over", command, [limit + 1, limit + 1])
    assert over.returncode == 1
    assert f"{NOT_STARTED}halo1: Qwen/Qwen3-14B" in over.stderr
    assert "a smaller (quantized) model" in over.stderr


def test_a_worker_that_lacks_the_heads_snapshot_gets_a_copy_and_nothing_is_fetched() -> None:
    cluster = serve_cluster()
    nodes = {"halo1": converged(cluster, "halo1"), "halo2": converged(cluster, "halo2")}
    nodes["halo2"] = {**nodes["halo2"], ModelFiles: []}
    result = plan(cluster, nodes)
    assert names(result, "halo1") == [COPY]
    assert names(result, "halo2") == []


def test_a_worker_on_another_revision_gets_the_heads() -> None:
    cluster = serve_cluster()
    nodes = {"halo1": converged(cluster, "halo1"), "halo2": converged(cluster, "halo2")}
    older = [MODEL_FILES[0].replace("a" * 40, "b" * 40), *MODEL_FILES[1:]]
    nodes["halo2"] = {**nodes["halo2"], ModelFiles: older}
    assert names(plan(cluster, nodes), "halo1") == [COPY]


def test_every_fetches_on_each_node_and_copies_nothing() -> None:
    result = plan_cluster(serve_cluster(serve=", download: every"))
    for node in ("halo1", "halo2"):
        assert DOWNLOAD in names(result, node)
        assert "HF_HUB_OFFLINE" not in result.uploads(node)[f"{CONFIG}/serve.env"]
        assert not copies(result, node)
    assert not any("HF_HUB_OFFLINE=0" in c for c in result.commands("halo1"))


def test_the_users_hf_hub_offline_wins() -> None:
    result = plan_cluster(serve_cluster(serve=", env: {HF_HUB_OFFLINE: '1'}"))
    env = result.uploads("halo1")[f"{CONFIG}/serve.env"]
    assert env.count("HF_HUB_OFFLINE=") == 1
    assert not any("HF_HUB_OFFLINE=0" in c for c in result.commands("halo1"))


def test_never_refuses_vllm_on_the_head_when_a_node_lacks_the_model() -> None:
    cluster = serve_cluster(serve=", download: never")
    result = plan(cluster, {"halo1": user_node(model=MODEL_FILES), "halo2": user_node()})
    assert result.refused == {
        "halo1": f"model not in place: vLLM not started ({PAGE}): halo2: "
        "Qwen/Qwen3-14B is not in ~vllm/.cache/huggingface/hub: set serve.download: once, or "
        "put it there yourself (the image's `hf download Qwen/Qwen3-14B` as vllm)"
    }
    assert START not in names(result, "halo1")
    assert f"{CONFIG}/vllm-start.sh" not in result.uploads("halo1")
    for node in ("halo1", "halo2"):
        assert not copies(result, node)
        assert not any("hf download" in c for c in result.commands(node))


def test_never_with_the_model_everywhere_starts_vllm() -> None:
    cluster = serve_cluster(serve=", download: never")
    result = plan(cluster, {n: user_node(model=MODEL_FILES) for n in ("halo1", "halo2")})
    assert result.refused == {} and START in names(result, "halo1")


def test_a_model_folder_missing_on_a_node_is_refused_and_never_copied() -> None:
    cluster = serve_cluster(serve=", model: /srv/models/qwen")
    folder = ["dir /srv/models/qwen", "728 config.json"]
    result = plan(cluster, {"halo1": user_node(model=folder), "halo2": user_node()})
    assert result.refused["halo1"].endswith(
        "halo2: the model folder /srv/models/qwen is not there: copy it there "
        "(serve.download never copies a path)"
    )
    assert not copies(result, "halo1")
    assert not any("hf download" in c for c in result.commands("halo1"))


def test_a_boolean_download_is_refused_with_the_values() -> None:
    with pytest.raises(ConfigError, match=r"serve\.download: .* is not one of: once, every, never"):
        serve_cluster(serve=", download: true")


def test_model_files_reads_the_snapshot_through_its_links() -> None:
    command = ModelFiles().command("vllm", "Qwen/Qwen3-14B")
    assert "find -L" in command and "refs/main" in command
    found = ModelFiles().process([*MODEL_FILES, "not a line"])
    assert found == {
        "dir": SNAPSHOT,
        "files": {"config.json": 728, "model-00001-of-00004.safetensors": 3_700_000_000},
        "expected": None,
    }
    assert complete(found)


def tree(*files: tuple[str, int]) -> list[str]:
    """huggingface_hub's trees/REV.json as ModelFiles prints it (`_tree_cache.py`)."""
    listing = {
        "format_version": 1,
        "files": {p: {"size": n, "blob_id": "0" * 40} for p, n in files},
    }
    return ["tree-begin", *json.dumps(listing, indent=1).splitlines(), "", "tree-end"]


# the recorded tree: config.json and four weight files; the node holds only the first of them
PARTIAL = MODEL_FILES + tree(
    ("config.json", 728),
    *((f"model-0000{i}-of-00004.safetensors", 3_700_000_000) for i in range(1, 5)),
)


def test_a_snapshot_missing_files_of_its_tree_is_incomplete() -> None:
    found = ModelFiles().process(PARTIAL)
    assert found["expected"]["model-00004-of-00004.safetensors"] == 3_700_000_000
    assert not complete(found)
    assert tree_files("{not json") is None and tree_files('{"format_version": 2}') is None


def test_an_interrupted_download_on_the_head_is_fetched_again_before_the_copy() -> None:
    """huggingface_hub writes refs/main and the tree before the first file: the model's record
    says it was prepared, the snapshot is not complete, and nothing partial is copied as is."""
    cluster = serve_cluster()
    nodes = {"halo1": converged(cluster, "halo1"), "halo2": converged(cluster, "halo2")}
    nodes["halo1"] = {**nodes["halo1"], ModelFiles: PARTIAL}
    ops = names(plan(cluster, nodes), "halo1")
    assert ops.index(DOWNLOAD) < ops.index(COPY)


def test_a_worker_with_an_incomplete_copy_gets_the_rest() -> None:
    cluster = serve_cluster()
    nodes = {"halo1": converged(cluster, "halo1"), "halo2": converged(cluster, "halo2")}
    whole = MODEL_FILES + tree(
        ("config.json", 728), ("model-00001-of-00004.safetensors", 3_700_000_000)
    )
    nodes["halo1"] = {**nodes["halo1"], ModelFiles: whole}
    nodes["halo2"] = {**nodes["halo2"], ModelFiles: MODEL_FILES[:2] + whole[3:]}
    assert names(plan(cluster, nodes), "halo1") == [COPY]


def test_never_refuses_an_incomplete_snapshot() -> None:
    cluster = serve_cluster(serve=", download: never")
    result = plan(
        cluster, {"halo1": user_node(model=PARTIAL), "halo2": user_node(model=MODEL_FILES)}
    )
    assert result.refused["halo1"].endswith("as vllm)")
    assert "halo1: Qwen/Qwen3-14B" in result.refused["halo1"]
