"""`halo-cluster status`'s line about the head's stall watchdog (docs/roles/serve.md, The stall
watchdog): whether its service runs, and its last restart, or its hold at the bound, with the
reason, as the head's history has them."""

from __future__ import annotations

import json
import shlex

from halo_cluster.config.lock import HISTORY
from halo_cluster.config.model import Cluster
from halo_cluster.node import batch
from halo_cluster.node.facts import as_user

WATCHDOG = "halo-watchdog"  # the serve role's unit (roles/serve/watchdog.py)
RESTART = "watchdog-restart"  # its history's events (roles/serve/stallwatch.py)
LINES = """grep -E '"event": ?"watchdog-'"""  # its restarts and holds


def commands(cluster: Cluster) -> dict[str, str]:
    """What the head is asked of its watchdog (nothing when `serve.watchdog_enabled` is off)."""
    if not cluster.serve.watchdog_enabled:
        return {}
    user = cluster.cluster_user
    history = f"~{shlex.quote(user)}/{HISTORY}"
    return {
        "watchdog": as_user(user, f"systemctl --user is-active {WATCHDOG}.service"),
        "watchdog_last": f"{LINES} {history} 2>/dev/null | tail -n 1",
    }


def read(found: dict[str, batch.Part]) -> dict:
    """{state, last: {time, event, reason}} from the head's read; {} without a watchdog."""
    if "watchdog" not in found:
        return {}
    state = (found["watchdog"].filled or ["unknown"])[0].strip() or "unknown"
    try:
        event = json.loads(found["watchdog_last"].filled[-1])
    except (ValueError, IndexError):
        event = {}
    keys = ("time", "event", "reason")
    last = {k: str(event.get(k, "")) for k in keys} if isinstance(event, dict) and event else {}
    return {"state": state, "last": last}


def line(watchdog: dict) -> str:
    """One line: `watchdog: active; last restart TIME: REASON` ("" without a watchdog)."""
    if not watchdog:
        return ""
    said = f"watchdog: {watchdog['state']}"
    last = watchdog.get("last")
    if not last:
        return f"{said}; no restart yet"
    what = "last restart" if last["event"] == RESTART else "holding (restarts per hour) since"
    return f"{said}; {what} {last['time']}: {last['reason']}"
