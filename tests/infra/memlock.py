"""verify's verdict on locked memory where RCCL registers it: each running service container's
own hard limit (its main process's /proc/PID/limits, `Target.services_memlock`), never a login
session's, which gets limits.d's unlimited while a user manager started before it keeps its
services at 8 MiB."""

from __future__ import annotations

from halo_cluster.config.serving import SERVING_CONTAINERS


def measured(found: dict[str, str | None]) -> str:
    """The measured column: each running container's hard limit."""
    return ", ".join(f"{name} {value}" for name, value in found.items()) or "none running"


def problem(node: str, user: str, found: dict[str, str | None]) -> str | None:
    """Why `found` (container -> hard limit) fails the check, with the fix; None: it passes."""
    if not found:
        return f"{node}: none of {', '.join(SERVING_CONTAINERS)} runs: re-run the deploy"
    limited = [f"{value} bytes in {name}" for name, value in found.items() if value != "unlimited"]
    if not limited:
        return None
    return (
        f"{node}: locked memory {', '.join(limited)}, expected unlimited: re-run the deploy (it "
        f"restarts {user}'s systemd manager when that runs limited), or reboot"
    )
