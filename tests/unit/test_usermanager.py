"""When the cluster user's systemd manager must restart, from what it runs with (UserManager), on
PID 1's real /proc/1/limits (tests/plan/fixtures/SOURCES.md: systemd's own 64 MiB)."""

from __future__ import annotations

from halo_cluster.roles.serve.facts import UserManager
from halo_cluster.roles.serve.usermanager import hard_memlock, needs_reexec, stale_because
from tests.unit.helpers_limits import (
    CONTAINER_CAPS,
    HOST_CAPS,
    MANAGER_ROW,
    PID1_LIMITS,
    PID1_ROW,
)


def fact(caps: str = HOST_CAPS, manager: bool = True) -> dict:
    """UserManager's reading of a node whose PID 1 is systemd at 64 MiB, DefaultLimitMEMLOCK
    still the default, the manager (when it runs) at 8 MiB."""
    output = [f"pid1_memlock={PID1_ROW}", f"pid1_caps={caps}", "default_memlock=8388608"]
    if manager:
        output += ["gids=1000 39 105", f"memlock={MANAGER_ROW}"]
    return UserManager().process(output)


def test_the_limits_rows_hard_column() -> None:
    assert hard_memlock(PID1_LIMITS) == "67108864"
    assert hard_memlock(MANAGER_ROW) == "8388608"
    assert hard_memlock("Max locked memory         unlimited            unlimited  bytes") == (
        "unlimited"
    )
    assert hard_memlock("Max open files            1024                 4096     files") is None


def test_fact_parses_the_managers_groups_and_limits() -> None:
    assert fact() == {
        "pid1_memlock": "67108864",
        "pid1_caps": 0x1FFFFFFFFFF,
        "default_memlock": "8388608",
        "gids": [1000, 39, 105],
        "memlock": "8388608",
    }


def test_missing_group_restarts_the_manager() -> None:
    assert stale_because(fact(), [39, 105, 106], memlock=False) == "it lacks the groups 106"


def test_a_real_pid_1_at_64_mib_still_restarts_a_manager_at_8_mib() -> None:
    """systemd's PID 1 is never unlimited itself; holding CAP_SYS_RESOURCE it gives the
    restarted manager DefaultLimitMEMLOCK=infinity once re-executed."""
    manager = fact()
    assert stale_because(manager, [39], memlock=True) == (
        "its locked-memory limit is 8388608, not unlimited"
    )
    assert needs_reexec(manager, memlock=True)
    assert stale_because(manager, [39], memlock=False) is None
    assert not needs_reexec(manager, memlock=False)


def test_a_manager_with_what_it_needs_stays() -> None:
    manager = {**fact(), "memlock": "unlimited", "default_memlock": "infinity"}
    assert stale_because(manager, [39, 105], memlock=True) is None
    assert not needs_reexec(manager, memlock=True)


def test_a_manager_not_running_yet_restarts_only_for_memlock() -> None:
    """It starts during the deploy (linger) before the limits file is written."""
    fresh = fact(manager=False)
    assert "gids" not in fresh and "memlock" not in fresh
    assert stale_because(fresh, [39], memlock=True) == (
        "it started before the locked-memory settings"
    )
    assert stale_because(fresh, [39], memlock=False) is None


def test_memlock_pid_1_cannot_give_is_never_a_reason() -> None:
    """A container whose PID 1 lacks CAP_SYS_RESOURCE and is limited itself (a lab node):
    restarting would change nothing and plan a restart on every run."""
    capped = fact(caps=CONTAINER_CAPS)
    assert stale_because(capped, [39], memlock=True) is None
    assert not needs_reexec(capped, memlock=True)
    assert stale_because(fact(caps=CONTAINER_CAPS, manager=False), [39], memlock=True) is None
    # the groups still count there
    assert stale_because(capped, [39, 106], memlock=True) == "it lacks the groups 106"


def test_an_unreadable_pid_1_grants_nothing() -> None:
    assert stale_because({}, [39], memlock=True) is None
    assert not needs_reexec({}, memlock=True)
