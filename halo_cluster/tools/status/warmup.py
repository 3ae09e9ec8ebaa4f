"""`halo-cluster status`'s line about the head's warm-up (docs/roles/serve.md, The warm-up): the
last `warmup` line of the head's history for each served model, so that a model that answers
/health but no completion shows here as it does in the history."""

from __future__ import annotations

import json
import shlex

from halo_cluster.config.lock import HISTORY
from halo_cluster.config.model import Cluster
from halo_cluster.node import batch

LINES = """grep -E '"event": ?"warmup"'"""  # its lines (roles/serve/warmup.py: EVENT)
LAST = 50  # the last warm-up lines looked at: several a start with several models


def commands(cluster: Cluster) -> dict[str, str]:
    """What the head is asked of its warm-ups."""
    history = f"~{shlex.quote(cluster.cluster_user)}/{HISTORY}"
    return {"warmup": f"{LINES} {history} 2>/dev/null | tail -n {LAST}"}


def read(found: dict[str, batch.Part]) -> dict:
    """{model: {time, ok, seconds, reason}}, each model's last warm-up; {} without one."""
    last: dict[str, dict] = {}
    for text in found["warmup"].filled if "warmup" in found else []:
        try:
            event = json.loads(text)
        except ValueError:
            continue  # a torn line: the others still count
        if isinstance(event, dict) and "model" in event:
            keys = ("time", "ok", "seconds", "reason")
            last[str(event["model"])] = {k: event.get(k) for k in keys}
    return last


def line(warmups: dict) -> str:
    """One line: `warm-up: MODEL 2.3 s at TIME; ...`, a failed one with its reason ("" none)."""
    said = []
    for model, last in warmups.items():
        if last["ok"]:
            said.append(f"{model} {float(last['seconds'] or 0):.1f} s at {last['time']}")
        else:
            said.append(f"{model} FAILED at {last['time']}: {last['reason']}")
    return f"warm-up: {'; '.join(said)}" if said else ""
