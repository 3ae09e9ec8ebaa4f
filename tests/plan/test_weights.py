"""Where the weights come from (`serve.download`): `once` fetches on the head and copies to each
worker that lacks the head's snapshot, `every` fetches on each node, `never` (and a model given as
a path) expects them in place and refuses vLLM's start on the head, naming the node and the fix."""

from __future__ import annotations

import pytest

from halo_cluster.config.model import ConfigError
from roles.serve.facts import ModelFiles
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


def test_a_worker_that_lacks_the_heads_snapshot_gets_a_copy_and_nothing_is_fetched() -> None:
    cluster = serve_cluster()
    nodes = {"halo1": converged(cluster, "halo1"), "halo2": converged(cluster, "halo2")}
    nodes["halo2"] = {**nodes["halo2"], "-printf '%s %P": []}
    result = plan(cluster, nodes)
    assert names(result, "halo1") == [COPY]
    assert names(result, "halo2") == []


def test_a_worker_on_another_revision_gets_the_heads() -> None:
    cluster = serve_cluster()
    nodes = {"halo1": converged(cluster, "halo1"), "halo2": converged(cluster, "halo2")}
    older = [MODEL_FILES[0].replace("a" * 40, "b" * 40), *MODEL_FILES[1:]]
    nodes["halo2"] = {**nodes["halo2"], "-printf '%s %P": older}
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
        "halo1": "model not in place: vLLM not started (docs/roles/serve.md): halo2: "
        "Qwen/Qwen3-14B is not in ~vllm/.cache/huggingface/hub: fetch it as vllm "
        "(hf download Qwen/Qwen3-14B) or set serve.download: once"
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
    }
