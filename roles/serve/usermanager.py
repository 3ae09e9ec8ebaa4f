"""Whether the cluster user's systemd manager must restart for its services to get the groups and
the locked-memory limit the deploy gives the user: a manager reads both only when it starts, and
rootless podman clamps `Ulimit=memlock=-1` to its hard limit (what it runs with: the
`UserManager` fact in facts.py)."""

from __future__ import annotations

UNLIMITED = ("unlimited", "infinity")


def stale_because(manager: dict, wanted_gids: list[int], memlock: bool) -> str | None:
    """Why a running manager must restart (None: it need not). A manager that is not running
    yet starts during the deploy (linger) before the memlock settings are written: with
    `memlock` it must restart too. Memlock counts only where PID 1 can give it."""
    possible = manager.get("pid1_memlock") in UNLIMITED
    if "gids" not in manager:
        return "it started before the locked-memory settings" if memlock and possible else None
    missing = sorted(set(wanted_gids) - set(manager["gids"]))
    if missing:
        return f"it lacks the groups {', '.join(map(str, missing))}"
    if memlock and possible and manager.get("memlock") not in UNLIMITED:
        return f"its locked-memory limit is {manager.get('memlock')}, not unlimited"
    return None


def needs_reexec(manager: dict, memlock: bool) -> bool:
    """PID 1 reads DefaultLimitMEMLOCK (system.conf.d) only at boot or `daemon-reexec`."""
    possible = manager.get("pid1_memlock") in UNLIMITED
    return memlock and possible and manager.get("default_memlock") not in UNLIMITED
