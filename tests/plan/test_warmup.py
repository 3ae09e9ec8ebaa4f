"""The head's warm-up planned on recorded real outputs, for both launchers: its unit, program and
settings on the head only, Wanted by the head's vLLM quadlet and bound to it, so that every start
of vLLM runs it; the deploy's wait for serving waits for it; nothing of it on a worker, and a
changed warm-up file restarts nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from halo_cluster.config.serving import WARMUP_COMPLETION_SECONDS, warmup_after_health
from halo_cluster.roles.serve import vllm, warmup
from halo_cluster.roles.serve.files import BY_NAME
from tests.plan.harness import plan
from tests.plan.nodes import HOME, converged, native_node, plan_cluster, serve_cluster

UNIT, PROGRAM, SETTINGS = (
    f"{HOME}/{BY_NAME[n].path}" for n in ("warmup_unit", "warmup_program", "warmup_settings")
)
QUADLET = f"{HOME}/.config/containers/systemd/halo-vllm.container"
LAUNCHERS = pytest.mark.parametrize("launcher", ["", ", launcher: native"], ids=["ray", "native"])


@LAUNCHERS
def test_the_heads_vllm_wants_the_warmup_and_the_worker_has_none(launcher: str) -> None:
    result = plan_cluster(serve_cluster(serve=launcher + ", served_model_name: qwen14"))
    head, worker = result.uploads("halo1"), result.uploads("halo2")
    assert "Wants=halo-warmup.service" in head[QUADLET].splitlines()
    assert head[PROGRAM] == Path(warmup.__file__).read_text()
    unit = head[UNIT].splitlines()
    assert {"BindsTo=halo-vllm.service", "After=halo-vllm.service", "Type=oneshot"} <= set(unit)
    assert "ExecStart=/usr/bin/python3 %h/.config/halo-cluster/warmup.py " \
        "%h/.config/halo-cluster/warmup.json" in unit  # fmt: skip
    settings = warmup.Settings(**json.loads(head[SETTINGS]))
    # the engine's start bound (serve.ready_timeout's default: no weights read here), one completion
    timeout = 1800 + WARMUP_COMPLETION_SECONDS + vllm.WARMUP_MARGIN_SECONDS
    assert f"TimeoutStartSec={timeout}" in unit
    assert not any(line.startswith(("Restart=", "WantedBy=")) for line in unit)  # per start only
    assert settings.models == ["qwen14"]  # the name vLLM serves, --served-model-name
    assert settings.url == "http://192.168.100.1:8000" and settings.ready_seconds == 1800
    # below the home, read there: the key never copied into the settings
    assert (settings.secrets, settings.history) == (
        ".config/halo-cluster/secrets.env",
        ".local/state/halo-cluster/history.jsonl",
    )
    assert not any(path in worker for path in (UNIT, PROGRAM, SETTINGS))
    if launcher:  # the worker's rank has a quadlet too, without the warm-up
        assert "Wants=halo-warmup" not in worker[QUADLET]
    (wait,) = [c for c in result.commands("halo1") if c.startswith("FunctionCommand(_wait")]
    assert wait.endswith(f", {warmup_after_health(1)}), {{}})"), wait


@LAUNCHERS
def test_a_changed_warmup_file_reloads_and_restarts_nothing(launcher: str) -> None:
    """A new warm-up unit is read at the next start of vLLM: the deploy reloads the user's
    units and restarts no service for it."""
    before = serve_cluster(serve=launcher)
    node = native_node if launcher else converged
    nodes = {n.name: node(before, n.name) for n in before.nodes}
    result = plan(serve_cluster(serve=launcher + ", ready_timeout: 900"), nodes)
    head = [op.name for op in result.ops["halo1"] if op.commands or op.uploads]
    services = [n for n in head if n.startswith("Cluster services")]
    assert f"Cluster services | Service file {UNIT}" in services, services
    assert f"Cluster services | Service file {SETTINGS}" in services
    assert "Cluster services | Reload the user's units" in services
    assert not any("Restart halo-vllm" in n or "Start every rank" in n for n in services), services
    unit = result.uploads("halo1")[UNIT]
    assert f"TimeoutStartSec={900 + WARMUP_COMPLETION_SECONDS + vllm.WARMUP_MARGIN_SECONDS}" in unit
