"""Weights fetched once, in the lab: the head's real `hf download` fetches a model from the lab's
own hub (lab/hubserver.py, on this machine, counting every byte it sends), rsync copies it to
the worker over the data link, the worker's copy is the hub's (checksums), a re-run fetches and
copies nothing, and a worker that already has the model gets nothing even when the head fetches
again."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest

from lab import hub
from lab.hubserver import Hub
from lab.network import mgmt_addresses
from tests.e2e.conftest import Lab, failure
from tests.e2e.serving_lab import SERVE, wait_serving

REPO = f"~vllm/.cache/huggingface/hub/models--{hub.FETCHED.replace('/', '--')}"
COPY = f"Copy {hub.FETCHED} to node2 over the data link"
DOWNLOAD = f"Download {hub.FETCHED} on this node"


@pytest.fixture
def lab_hub() -> Iterator[Hub]:
    """The hub on this machine's end of the head's management link: only the head reaches it
    (a worker's /30 has no route to another node's), so nothing but the head can fetch."""
    server = Hub((mgmt_addresses(1)[0], 0), hub.hub_repos()).start()
    yield server
    server.stop()


def snapshot_sums(lab: Lab, node: str) -> dict[str, str]:
    """sha256 of every file of the node's snapshot, through its links."""
    snapshot = f'{REPO}/snapshots/"$(cat {REPO}/refs/main)"'
    out = lab.ssh(node, f"cd {snapshot} && find -L . -type f -exec sha256sum {{}} +", check=False)
    sums = (line.split() for line in out.splitlines())
    return {path.removeprefix("./"): digest for digest, path in sums}


def output(result) -> str:
    return result.stdout + result.stderr  # pyinfra prints its operations on stderr


def blob_inodes(lab: Lab, node: str) -> str:
    return lab.ssh(node, f"stat -c '%i %s %n' {REPO}/blobs/*")


def test_weights_are_fetched_once_and_copied_to_the_worker(serving: Lab, lab_hub: Hub) -> None:
    lab = serving
    for node in lab.nodes:
        lab.ssh(node, f"rm -rf {REPO}")
    served = SERVE.replace(hub.MODEL, hub.FETCHED)
    served = served.replace('HF_HUB_OFFLINE: "1"', f'HF_ENDPOINT: "{lab_hub.url}"')
    config = lab.config("reboot: if-needed\n" + served)
    files = hub.fetched_files()
    # every file once, and config.json once more: the deploy's fit estimate reads it from the
    # hub before the download (roles/serve/fit.py; the file list it reads is the API's, uncounted)
    size = sum(len(data) for data in files.values()) + len(files["config.json"])

    first = lab.deploy(config=config)
    assert first.returncode == 0, failure(first)
    assert DOWNLOAD in output(first) and COPY in output(first), output(first)[-3000:]
    # fetched from outside the cluster once, not once per node
    assert lab_hub.bytes_sent() == size, dict(lab_hub.sent)
    expected = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    for node in lab.nodes:
        assert snapshot_sums(lab, node) == expected, node
    wait_serving(lab)

    worker_blobs = blob_inodes(lab, "node2")
    again = lab.deploy(config=config)
    assert again.returncode == 0, failure(again)
    assert DOWNLOAD not in output(again) and COPY not in output(again)
    assert lab_hub.bytes_sent() == size

    # the head fetches again (its record of the model removed): the hub's answer is that the
    # head's cache is current, and rsync sends the worker nothing (its blobs are the same files)
    lab.ssh("node1", "rm ~vllm/.config/halo-cluster/model")
    third = lab.deploy(config=config)
    assert third.returncode == 0, failure(third)
    assert DOWNLOAD in output(third) and COPY in output(third)
    assert lab_hub.bytes_sent() == size
    assert blob_inodes(lab, "node2") == worker_blobs

    back = lab.deploy(config=lab.config("reboot: if-needed\n" + SERVE))
    assert back.returncode == 0, failure(back)
    wait_serving(lab)
