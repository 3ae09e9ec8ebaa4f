"""verify's memlock check (tests/infra/memlock.py, read by `Target.services_memlock`) on the
running containers' own limits, /proc/PID/limits rows in the kernel's format (a real
/proc/1/limits: tests/unit/helpers_limits.py), never a fresh login session."""

from __future__ import annotations

from types import SimpleNamespace

from tests.infra import memlock
from tests.infra.target import Target
from tests.unit.helpers_limits import MANAGER_ROW, UNLIMITED_ROW
from tests.unit.helpers_native import RAY


def head(stdout: str) -> Target:
    """The Ray cluster's head, its containers' rows read."""
    target = Target(RAY, RAY.head, None)
    target._read[target.services_memlock_command] = SimpleNamespace(stdout=stdout)
    return target


def test_the_read_is_each_containers_proc_limits_not_a_login() -> None:
    command = head("").services_memlock_command
    assert "podman inspect --format '\"'\"'{{.State.Pid}}'\"'\"'" in command
    assert "/proc/$pid/limits" in command and "su -" not in command and "ulimit" not in command
    assert "halo-ray halo-vllm" in command


def test_containers_at_8_mib_fail_with_the_fix() -> None:
    found = head(f"halo-ray {UNLIMITED_ROW}\nhalo-vllm {MANAGER_ROW}\n").services_memlock
    assert found == {"halo-ray": "unlimited", "halo-vllm": "8388608"}
    assert memlock.measured(found) == "halo-ray unlimited, halo-vllm 8388608"
    assert memlock.problem("a", "vllm", found) == (
        "a: locked memory 8388608 bytes in halo-vllm, expected unlimited: re-run the deploy (it "
        "restarts vllm's systemd manager when that runs limited), or reboot"
    )


def test_unlimited_containers_pass() -> None:
    found = head(f"halo-ray {UNLIMITED_ROW}\nhalo-vllm {UNLIMITED_ROW}\n").services_memlock
    assert memlock.problem("a", "vllm", found) is None


def test_no_container_running_fails() -> None:
    found = head("").services_memlock
    assert memlock.measured(found) == "none running"
    assert memlock.problem("a", "vllm", found) == (
        "a: none of halo-ray, halo-vllm runs: re-run the deploy"
    )
