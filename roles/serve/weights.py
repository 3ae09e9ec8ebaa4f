"""Where the model's weights come from (`serve.download`, docs/roles/serve.md "Weights"): every
node fetches them (`every`), the head fetches them and copies them to the workers over the data
link (`once`), or they are expected in place (`never`; a model given as a path always is). On
the head before vLLM starts: every node where vLLM would not find them and nothing in this run
puts them there."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath

from pyinfra import host, logger

from halo_cluster.node import image as cluster_image
from halo_cluster.node.nodefiles import cached
from halo_cluster.roles.serve import budget
from halo_cluster.roles.serve.download import download_model
from halo_cluster.roles.serve.facts import ModelFiles, complete
from halo_cluster.roles.serve.peers import nodes, unreachable
from halo_cluster.roles.serve.services import copy_model

ONCE, EVERY, NEVER = "once", "every", "never"


def read(data) -> tuple[type, dict]:
    return ModelFiles, {"user": data.halo_cluster_user, "model": data.halo_serve_model}


def offline(data) -> bool:
    """Whether the services read the model from the cache only (HF_HUB_OFFLINE=1): this deploy
    or the user put it there, and a node must not fetch what it misses in silence. A value the
    user set in `serve.env` is theirs."""
    return data.halo_serve_download in (ONCE, NEVER) and "HF_HUB_OFFLINE" not in data.halo_serve_env


def fetch(model_changed: bool) -> None:
    """This node's part: the download (`every`: each node, `once`: the head) when the model
    changed or is not here, and on the head with `once` the copy to each worker whose snapshot
    is not the head's (or to all, after a download: rsync then sends only what they miss)."""
    data = host.data
    model, mode = data.halo_serve_model, data.halo_serve_download
    if model.startswith("/") or mode == NEVER:
        return
    head = data.halo_role == "head"
    here = _snapshot(host)
    download = (model_changed or not here.complete) and (mode == EVERY or head)
    if download:
        download_model(
            name=f"Download {model} on this node",
            user=data.halo_cluster_user,
            image=cluster_image.pinned(host),
            model=model,
            token=data.halo_serve_hf_token_file is not None,
            go_online=offline(data),
        )
    if download and head:
        budget.weigh_downloaded()  # before it is copied and before vLLM starts
    if not (head and mode == ONCE):
        return
    for name in unreachable():
        logger.warning(f"{host.print_prefix}{name} not in this run: {model} is copied to it later")
    for peer in nodes()[1:]:
        there = _snapshot(peer)
        if download or there != here or not there.complete:
            copy_model(
                name=f"Copy {model} to {peer.data.halo_node} over the data link",
                user=data.halo_cluster_user,
                model=model,
                address=peer.data.halo_data_address,
            )


def missing() -> list[str]:
    """On the head: one line per reachable node where vLLM would not find the model and this
    run does not put it (`never`, or a path); none otherwise."""
    data = host.data
    model, user = data.halo_serve_model, data.halo_cluster_user
    if not (model.startswith("/") or data.halo_serve_download == NEVER):
        return []
    if model.startswith("/"):
        what = (
            f"the model folder {model} is not there: "
            "copy it there (serve.download never copies a path)"
        )
    else:
        what = (
            f"{model} is not in ~{user}/.cache/huggingface/hub: set serve.download: once, or "
            f"put it there yourself (the image's `hf download {model}` as {user})"
        )
    return [f"{node.data.halo_node}: {what}" for node in nodes() if not _snapshot(node).complete]


def refusal(lines: list[str]) -> str:
    return f"model not in place: vLLM not started ({budget.PAGE}): " + " | ".join(lines)


@dataclass(frozen=True)
class Snapshot:
    """A node's snapshot: its revision (the folder's name) and its files with their sizes; two
    nodes hold the same one when both are equal. `complete`: facts.complete."""

    revision: str | None
    files: dict[str, int]
    complete: bool = field(compare=False)


def _snapshot(node) -> Snapshot:
    fact, kwargs = read(node.data)
    found = cached(node, fact, **kwargs)
    revision = PurePosixPath(found["dir"]).name if found["dir"] else None
    return Snapshot(revision, found["files"], complete(found))
