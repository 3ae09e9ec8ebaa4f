"""A serving config and the head's answers to the bench's read, from recorded outputs: shared
by the bench's tests (test_bench.py) and the stand-in's (test_standin_bench.py)."""

from __future__ import annotations

import json
from pathlib import Path

from halo_cluster.node import batch
from halo_cluster.tools import project
from halo_cluster.tools.bench import run, store
from tests.recorded import skopeo_digest, strix_halo_versions, versions_output
from tests.unit.configs import VALID_ROCE, write

SERVING = VALID_ROCE + "serve: {enabled: true, model: Qwen/Qwen3-14B}\n"
REVISION = "a09a35458c702b33eeacc393d103063234e8bc28"
HEAD_READS = ("versions", "images", "revision", "models")  # a worker reads the first only


def cluster(tmp_path: Path, extra: str = ""):
    return project.load(write(tmp_path, SERVING + extra))


def gather_answers(digest: str, owned_by: str = "vllm") -> tuple[bytes, bytes]:
    """What the head and a worker print for their read (`gather_commands`), from recorded
    outputs, in the one batch format."""
    running, nevras = strix_halo_versions()
    versions = "\n".join(versions_output(running, nevras)) + "\n"
    head = [
        versions,
        f"halo-vllm docker.io/kyuz0/vllm-therock-gfx1151@{digest} {'c' * 64}\n",
        REVISION,  # huggingface_hub writes refs/main without a line break
        json.dumps({"data": [{"id": "Qwen/Qwen3-14B", "owned_by": owned_by}]}),
    ]
    return batch.joined(batch.Part(0, t.encode()) for t in head), batch.joined(
        [batch.Part(0, versions.encode())]
    )


def head_sections(digest: str, owned_by: str = "vllm") -> dict[str, dict[str, batch.Part]]:
    """Each node's read by name, as `read_cluster` gets it (HEAD_READS: `gather_commands`')."""
    head_read, worker_read = gather_answers(digest, owned_by)
    return {"halo1": batch.sections(head_read, HEAD_READS),
            "halo2": batch.sections(worker_read, HEAD_READS[:1])}  # fmt: skip


def head(digest: str | None = None, owned_by: str = "vllm") -> store.Head:
    found = head_sections(digest or skopeo_digest(), owned_by)
    nodes = {n: run.node_versions(f["versions"].filled) for n, f in found.items()}
    return run.parse_head(found["halo1"], nodes)


# a node that accepts the connection and never answers; the end of a shared connection (`-O
# exit`) answers at once, as ssh does with no master on the socket (else each node's close waits
# the transport's CLOSE_SECONDS: 10 s)
SILENT = '[ "$3" = -O ] && exit 0\nexec /bin/sleep 30\n'


def fake_ssh(tmp_path: Path, monkeypatch, body: str | None) -> None:
    """PATH with `ssh` as `body` (None: no ssh at all): the unit tests' one fake ssh (the bench's,
    status's and the transport's), given the transport's argv (`-F CONFIG ALIAS sh -s`, or
    `-F CONFIG -O exit ALIAS` for a shared connection's end)."""
    tools = tmp_path / "fakebin"
    tools.mkdir()
    if body is not None:
        (tools / "ssh").write_text("#!/bin/sh\n" + body)
        (tools / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", str(tools))
