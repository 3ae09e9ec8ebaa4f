"""`halo-cluster verify` with `serve.launcher: native` (tests/infra): the head's world read as the
deploy reads it, Ray's checks left out and the native ones kept (and the other way with Ray)."""

from __future__ import annotations

from types import SimpleNamespace

from tests.infra.conftest import launchers_checks
from tests.infra.target import Target
from tests.unit.helpers_native import LEADER, NATIVE, PEERS, RAY

SERVING = "tests/infra/test_serving.py::"
NAMES = (
    "test_ray_has_every_node_with_one_gpu",
    "test_ray_refuses_a_client_without_the_token",
    "test_native_world_has_every_node",
    "test_native_master_port_closed_on_the_management_side[a]",
    "test_vllm_health",
)


def items() -> list[SimpleNamespace]:
    found = [SimpleNamespace(nodeid=SERVING + n, name=n) for n in NAMES]
    return [
        *found,
        SimpleNamespace(nodeid="tests/infra/test_node.py::test_ray_x", name="test_ray_x"),
    ]


def test_native_keeps_its_world_checks_and_leaves_rays_out(capsys) -> None:
    kept = [item.name for item in launchers_checks(NATIVE, items())]
    assert kept == [
        "test_native_world_has_every_node",
        "test_native_master_port_closed_on_the_management_side[a]",
        "test_vllm_health",
        "test_ray_x",  # not a serving check: kept
    ]
    assert (
        "Ray's checks left out: serve.launcher is native in" in capsys.readouterr().err
    )  # stdout is --json's


def test_the_head_reads_its_world_not_ray() -> None:
    head = Target(NATIVE, NATIVE.head, None)
    commands = head.launcher_commands()
    assert commands == head.world_commands and not any("halo-ray" in c for c in commands)
    head._read.update(
        {commands[0]: SimpleNamespace(stdout=LEADER), commands[1]: SimpleNamespace(stdout=PEERS)}
    )
    assert head.world == (3, ["192.168.100.1", "192.168.100.2", "192.168.100.3"])


def test_ray_leaves_the_native_checks_out() -> None:
    kept = [item.name for item in launchers_checks(RAY, items())]
    assert kept == [
        "test_ray_has_every_node_with_one_gpu",
        "test_ray_refuses_a_client_without_the_token",
        "test_vllm_health",
        "test_ray_x",
    ]
    head = Target(RAY, RAY.head, None)
    assert head.launcher_commands() == [head.ray_nodes_command, head.ray_without_token_command]
