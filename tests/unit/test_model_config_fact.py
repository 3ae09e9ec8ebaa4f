"""The serve role's `ModelConfig` fact run for real: its shell command with this machine's curl
against the lab's stand-in hub (lab/hubserver.py, the Hub's HTTP API as huggingface_hub 1.33
calls it), and against a model folder; its output read back by its `process`, then judged by
the deploy's estimate (the lab's models carry a config.json the estimate reads)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from halo_cluster.decide import fitestimate
from halo_cluster.roles.serve.facts import ModelConfig
from lab import hub
from lab.hubserver import Hub

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="no curl on this machine")
NOBODY = "halo-no-such-user"  # its ~ does not expand: no cache, so the hub is asked


def read(tmp_path: Path, model: str, endpoint: str, token: str = "", online: bool = True):
    fact = ModelConfig()
    command = fact.command(NOBODY, model, endpoint, token, online)
    out = subprocess.run(
        ["sh", "-c", command], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    return fact.process(out.stdout.splitlines())


@pytest.fixture
def lab_hub(tmp_path: Path):
    server = Hub(("127.0.0.1", 0), hub.hub_repos(), rate_file=tmp_path / "rate").start()
    yield server
    server.stop()


def test_the_hubs_config_and_file_list_without_the_weights(tmp_path: Path, lab_hub: Hub) -> None:
    token = tmp_path / "hf-token"
    token.write_text("hf_not_a_real_token\n")
    found = read(tmp_path, hub.FETCHED, lab_hub.url, token=str(token))
    files = hub.fetched_files()
    assert found["source"] == f"{lab_hub.url}/{hub.FETCHED}" and found["error"] is None
    assert found["config"] == json.loads(files["config.json"])
    assert found["sizes"] == [len(files["model.safetensors"])]
    # only config.json's bytes crossed: the file list is the API's, the weights stay
    assert lab_hub.sent == {f"{hub.FETCHED}/config.json": len(files["config.json"])}
    judged = fitestimate.judge(
        found["config"],
        sum(found["sizes"]),
        model=hub.FETCHED,
        extra_args=(),
        tp=2,
        pp=1,
        nodes=2,
        gtt_bytes=124 * 1024**3,
        utilization=0.9,
        max_model_len=2048,
        concurrency=1,
    )
    assert judged.asked.fits and judged.asked.largest_len == 2048  # the model's own


def test_a_model_the_hub_does_not_have_is_an_error_not_a_guess(
    tmp_path: Path, lab_hub: Hub
) -> None:
    found = read(tmp_path, "halo-lab/absent", lab_hub.url)
    assert found["config"] is None and found["sizes"] is None
    assert found["error"] == "config.json: curl exit status 22"  # curl -f: HTTP 404


def test_offline_asks_nothing_and_a_folder_is_read_with_its_index(
    tmp_path: Path, lab_hub: Hub
) -> None:
    assert read(tmp_path, hub.FETCHED, lab_hub.url, online=False)["source"] is None
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_bytes(hub.files()["config.json"])
    index = {"metadata": {"total_size": 250_000_000}, "weight_map": {"a": "model.safetensors"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    found = read(tmp_path, str(folder), lab_hub.url)
    assert found["source"] == str(folder) and found["total_size"] == 250_000_000
    assert found["config"] == json.loads(hub.files()["config.json"])
    assert lab_hub.bytes_sent() == 0
