"""The memory budget planned on a recorded 128 GB-class Strix Halo (MemTotal and GTT from
recordings: tests/recorded.py says where each number comes from): a model that fits plans vLLM's
start, one too large for TP x PP nodes, or a budget over MemTotal, is refused with its numbers
before vLLM starts."""

from __future__ import annotations

import logging

import pytest

from halo_cluster.roles.serve.budget import NOT_STARTED
from tests.plan.harness import one_read
from tests.plan.nodes import CONFIG, HOME, plan_cluster, serve_cluster
from tests.recorded import memory_output

START = "Cluster services | Start halo-vllm"
REFUSED = NOT_STARTED
# Qwen3-14B in bf16: 8 safetensors of about 3.7 GB (14.8 billion parameters x 2 bytes)
QWEN_14B = [3_700_000_000] * 8
# a "280 GB" model: 8 files of 35 GB, as the lab's sparse one
LARGE = [35_000_000_000] * 8


@pytest.fixture(autouse=True)
def _log(caplog):
    caplog.set_level(logging.INFO)


def refusal(result, node: str = "halo1") -> str:
    """The head's refusal line (report.fail): it names every node's problem."""
    reason = result.refused[node]
    assert reason.startswith(REFUSED), reason
    return reason


def test_a_model_that_fits_plans_vllms_start_and_logs_the_table(caplog) -> None:
    cluster = serve_cluster(serve=", object_store_mib: 8192")
    result = plan_cluster(cluster, memory=memory_output(QWEN_14B))
    names = result.names("halo1")
    assert START in names and result.refused == {}
    # GTT 96 GiB x 0.9 = 86.4 GiB, + 8 GiB + 6 GiB = 100.4 GiB of MemTotal 122.7 GiB (82%)
    row = next(line for line in caplog.text.splitlines() if line.startswith("halo1  "))
    assert row.split() == [
        "halo1", "122.7", "GiB", "96.0", "GiB", "(sysfs)", "86.4", "GiB", "8.0", "GiB", "6.0",
        "GiB", "100.4", "GiB", "(82%)", "13.8", "GiB", "OK",
    ]  # fmt: skip
    assert "halo2  " in caplog.text  # every node's row, on the head


def test_a_model_too_large_for_the_nodes_is_refused_with_its_numbers(caplog) -> None:
    cluster = serve_cluster(serve=", object_store_mib: 8192")
    result = plan_cluster(cluster, memory=memory_output(LARGE))
    names = result.names("halo1")
    assert START not in names and set(result.refused) == {"halo1"}
    assert "Cluster services | Wait for vLLM's /health" not in names
    # vLLM's files are not written: a restart by systemd cannot start the refused model
    assert f"{CONFIG}/vllm-start.sh" not in result.uploads("halo1")
    assert f"{HOME}/.config/containers/systemd/halo-ray.container" in result.uploads("halo1")
    text = refusal(result)
    for node in ("halo1", "halo2"):  # one line per node
        assert (
            f"{node}: Qwen/Qwen3-14B: weights 130.4 GiB on this node (260.8 GiB / TP 2 x PP 1) "
            "are more than 90% of what vLLM may take, 86.4 GiB (GTT 96.0 GiB x 0.9)"
        ) in text
    assert "at least 4 nodes" in text and "a smaller (quantized) model" in text
    assert "refused: memory budget: vLLM not started" in caplog.text
    one_read(result)  # the head weighs halo2 from halo2's one command
    assert START not in plan_cluster(cluster, memory=memory_output(LARGE)).names("halo1")


def test_a_refused_model_is_neither_fetched_nor_copied() -> None:
    result = plan_cluster(
        serve_cluster(serve=", object_store_mib: 8192"), memory=memory_output(LARGE)
    )
    assert set(result.refused) == {"halo1"}
    for node in ("halo1", "halo2"):
        assert not any("hf download" in c or "rsync -a" in c for c in result.commands(node))


def test_a_budget_over_memtotal_is_refused_with_the_settings_that_fit() -> None:
    cluster = serve_cluster(serve=", object_store_mib: 40960, gpu_memory_utilization: 0.9")
    result = plan_cluster(cluster, memory=memory_output(QWEN_14B))
    text = refusal(result)
    assert (
        "halo1: vLLM 86.4 GiB (GTT 96.0 GiB x 0.9) + object store 40.0 GiB "
        "(serve.object_store_mib) + reserve 6.0 GiB = 132.4 GiB is 9.7 GiB more than MemTotal "
        "122.7 GiB: set serve.gpu_memory_utilization to at most 0.79 or "
        "serve.object_store_mib to at most 31015, or lower kernel.gtt_gib"
    ) in text


def test_rays_default_object_store_over_memtotal_is_a_warning_not_a_refusal(caplog) -> None:
    result = plan_cluster(serve_cluster(), memory=memory_output(QWEN_14B))
    assert START in result.names("halo1")
    assert "set serve.object_store_mib to at most 31015" in caplog.text
    assert "WARN" in caplog.text


def test_a_model_not_yet_downloaded_is_not_checked_and_vllm_starts(caplog) -> None:
    result = plan_cluster(serve_cluster(serve=", object_store_mib: 8192"), memory=memory_output())
    assert START in result.names("halo1")
    assert "weights not checked: no *.safetensors of Qwen/Qwen3-14B" in caplog.text


def test_in_a_container_the_memory_is_not_verified_and_the_weights_still_weighed(caplog) -> None:
    lab = memory_output(LARGE, virt="systemd-nspawn", sysfs=False,
                        cmdline="ro amdgpu.gttsize=126976 ttm.pages_limit=32505856")  # fmt: skip
    result = plan_cluster(serve_cluster(serve=", object_store_mib: 256"), memory=lab)
    assert START not in result.names("halo1")
    assert "memory NOT VERIFIED: a container sees its host's MemTotal" in caplog.text
    assert "(GTT 124.0 GiB x 0.9)" in refusal(result)
    assert "124.0 GiB (kernel arguments)" in caplog.text
