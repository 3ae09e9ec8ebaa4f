"""When the cluster user's systemd manager must restart, from what it runs with (UserManager)."""

from __future__ import annotations

from halo_cluster.roles.serve.facts import UserManager
from halo_cluster.roles.serve.usermanager import needs_reexec, stale_because

# as the fact prints it on a Fedora node: PID 1 unlimited hard limit, the manager 8 MiB
RECORDED = [
    "pid1_memlock=unlimited",
    "default_memlock=8388608",
    "gids=1000 39 105",
    "memlock=8388608",
]


def test_fact_parses_the_managers_groups_and_limits() -> None:
    assert UserManager().process(RECORDED) == {
        "pid1_memlock": "unlimited",
        "default_memlock": "8388608",
        "gids": [1000, 39, 105],
        "memlock": "8388608",
    }


def test_missing_group_restarts_the_manager() -> None:
    manager = UserManager().process(RECORDED)
    assert stale_because(manager, [39, 105, 106], memlock=False) == "it lacks the groups 106"


def test_limited_memlock_restarts_it_with_roce_only() -> None:
    manager = UserManager().process(RECORDED)
    assert stale_because(manager, [39], memlock=True) == (
        "its locked-memory limit is 8388608, not unlimited"
    )
    assert stale_because(manager, [39], memlock=False) is None
    assert needs_reexec(manager, memlock=True) and not needs_reexec(manager, memlock=False)


def test_a_manager_with_what_it_needs_stays() -> None:
    manager = {**UserManager().process(RECORDED), "memlock": "unlimited"}
    manager["default_memlock"] = "infinity"
    assert stale_because(manager, [39, 105], memlock=True) is None
    assert not needs_reexec(manager, memlock=True)


def test_a_manager_not_running_yet_restarts_only_for_memlock() -> None:
    fresh = {"pid1_memlock": "unlimited", "default_memlock": "infinity"}
    assert stale_because(fresh, [39], memlock=True) is not None
    assert stale_because(fresh, [39], memlock=False) is None


def test_memlock_pid_1_cannot_give_is_never_a_reason() -> None:
    """A container whose PID 1 has a limited hard limit: restarting would change nothing and
    plan a restart on every run."""
    capped = {"pid1_memlock": "65536", "default_memlock": "8388608", "gids": [39], "memlock": "8"}
    assert stale_because(capped, [39], memlock=True) is None
    assert not needs_reexec(capped, memlock=True)
