"""verify's memlock check (tests/infra/test_node.py) on the running containers' own limits, read
from /proc/PID/limits rows in the kernel's format (tests/plan/fixtures: a real /proc/1/limits),
never from a fresh login session."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.infra.target import Target
from tests.infra.test_node import test_memlock_unlimited_in_the_containers as check
from tests.unit.helpers_native import RAY
from tests.unit.test_usermanager import MANAGER_ROW, PID1_LIMITS

# the recorded row with both columns unlimited, as a process with RLIM_INFINITY prints them
UNLIMITED_ROW = next(
    line for line in PID1_LIMITS.splitlines() if line.startswith("Max locked memory")
).replace("67108864             67108864           ", "unlimited            unlimited          ")


def head(stdout: str) -> Target:
    """The Ray cluster's head on a real host (no container), its containers' rows read."""
    target = Target(RAY, RAY.head, None)
    target._read.update(
        {
            "systemd-detect-virt --container": SimpleNamespace(stdout="none\n"),
            target.services_memlock_command: SimpleNamespace(stdout=stdout),
        }
    )
    return target


def test_the_read_is_each_containers_proc_limits_not_a_login() -> None:
    command = head("").services_memlock_command
    assert "podman inspect --format '\"'\"'{{.State.Pid}}'\"'\"'" in command
    assert "/proc/$pid/limits" in command and "su -" not in command and "ulimit" not in command
    assert "halo-ray halo-vllm" in command


def test_containers_at_8_mib_fail_with_the_fix() -> None:
    assert RAY.interconnect == "roce"
    measured: list[str] = []
    target = head(f"halo-ray {UNLIMITED_ROW}\nhalo-vllm {MANAGER_ROW}\n")
    with pytest.raises(AssertionError, match=r"locked memory 8388608 bytes in halo-vllm, expected"):
        check(target, measured.append)
    assert measured == ["halo-ray unlimited, halo-vllm 8388608"]


def test_unlimited_containers_pass() -> None:
    measured: list[str] = []
    check(head(f"halo-ray {UNLIMITED_ROW}\nhalo-vllm {UNLIMITED_ROW}\n"), measured.append)
    assert measured == ["halo-ray unlimited, halo-vllm unlimited"]


def test_no_container_running_fails() -> None:
    with pytest.raises(AssertionError, match="none of halo-ray, halo-vllm runs"):
        check(head(""), lambda _: None)
