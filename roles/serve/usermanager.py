"""Whether the cluster user's systemd manager must restart for its services to get the groups and
the locked-memory limit the deploy gives the user: a manager reads both only when it starts, and
rootless podman clamps `Ulimit=memlock=-1` to its hard limit (what it runs with: the
`UserManager` fact in facts.py).

What decides is the manager's own hard limit (`/proc/PID/limits` of user@UID.service) against
what the config asks (unlimited, with roce), never PID 1's: systemd gives itself 64 MiB, not
unlimited (`HIGH_RLIMIT_MEMLOCK`, src/basic/def.h; since systemd/systemd#15551 max(64 MiB,
RAM/8)), and hands its services DefaultLimitMEMLOCK, which it may raise as it likes while it
holds CAP_SYS_RESOURCE."""

from __future__ import annotations

UNLIMITED = ("unlimited", "infinity")
CAP_SYS_RESOURCE = 24  # linux/capability.h: raise a hard resource limit
MEMLOCK_ROW = "Max locked memory"  # /proc/PID/limits (the kernel's fs/proc/base.c: proc_pid_limits)


def hard_memlock(text: str) -> str | None:
    """The hard memlock limit in `/proc/PID/limits` text ("unlimited" or bytes), None without
    its row. Its columns: the name (three words), soft, hard, units."""
    for line in text.splitlines():
        if line.startswith(MEMLOCK_ROW):
            words = line[len(MEMLOCK_ROW) :].split()
            return words[1] if len(words) > 1 else None
    return None


def can_grant(manager: dict) -> bool:
    """Whether a restarted manager can get unlimited memlock: PID 1 holds CAP_SYS_RESOURCE (a
    real node's systemd), or runs unlimited itself. A container without the capability (a lab
    node) cannot: restarting would change nothing and plan a restart on every run."""
    caps = manager.get("pid1_caps")
    held = caps is not None and bool(caps >> CAP_SYS_RESOURCE & 1)
    return held or manager.get("pid1_memlock") in UNLIMITED


def stale_because(manager: dict, wanted_gids: list[int], memlock: bool) -> str | None:
    """Why a running manager must restart (None: it need not). A manager that is not running
    yet starts during the deploy (linger, the user role) before the memlock settings are written
    (the rdma role): with `memlock` it must restart too."""
    possible = memlock and can_grant(manager)
    if "gids" not in manager:
        return "it started before the locked-memory settings" if possible else None
    missing = sorted(set(wanted_gids) - set(manager["gids"]))
    if missing:
        return f"it lacks the groups {', '.join(map(str, missing))}"
    if possible and manager.get("memlock") not in UNLIMITED:
        return f"its locked-memory limit is {manager.get('memlock')}, not unlimited"
    return None


def needs_reexec(manager: dict, memlock: bool) -> bool:
    """PID 1 reads DefaultLimitMEMLOCK (system.conf.d) only at boot or `daemon-reexec`."""
    return memlock and can_grant(manager) and manager.get("default_memlock") not in UNLIMITED
