"""The stall watchdog on the head (`serve.watchdog_*`, docs/roles/serve.md "The stall watchdog"):
a plain user unit of the cluster user, `halo-watchdog`, enabled into its default.target, running
stallwatch.py's own text with its settings as JSON beside it. Not a quadlet: it runs no
container, and it must reach the user's systemd and, over the data link, the workers' (the
launcher role's key and pinned host keys: no credential of its own)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from pyinfra import host

from halo_cluster.config.lock import HISTORY
from halo_cluster.config.serving import SECRETS_ENV, SERVICE_CONFIG
from halo_cluster.node.nodefiles import cached
from halo_cluster.node.operations import text_file
from halo_cluster.roles.serve import enginestart, stallwatch
from halo_cluster.roles.serve.facts import UserUnits, over_data_link
from halo_cluster.roles.serve.files import RAY, SYSTEMD_USER, VLLM
from halo_cluster.roles.serve.lifecycle import remove, running
from halo_cluster.roles.serve.ray import render
from halo_cluster.roles.serve.services import user_systemctl

WATCHDOG = "halo-watchdog"
UNIT = f"{SYSTEMD_USER}/{WATCHDOG}.service"
WANTS = f"{SYSTEMD_USER}/default.target.wants/{WATCHDOG}.service"  # `enable`'s link
PROGRAM = f"{SERVICE_CONFIG}/watchdog.py"
SETTINGS = f"{SERVICE_CONFIG}/watchdog.json"
PATHS = (UNIT, PROGRAM, SETTINGS, WANTS)
# the restart bound lives in the history: the program reads it back when it (re)starts


def wanted(data) -> bool:
    return bool(
        data.halo_serve_enabled and data.halo_serve_watchdog_enabled and data.halo_role == "head"
    )


def reads(data) -> tuple[tuple[type, dict], ...]:
    """The watchdog's unit state, on a head that runs it."""
    if not wanted(data):
        return ()
    return ((UserUnits, {"user": data.halo_cluster_user, "units": (WATCHDOG,)}),)


def settings(data, home: str) -> dict:
    """What the program reads (stallwatch.Settings): vLLM's URL and name, the launcher, each
    worker's SSH command over the data link in the config's order, the bounds, the files."""
    user = data.halo_cluster_user
    workers = [
        [address, *shlex.split(over_data_link(user, address, "-"))[:-1]]
        for address in data.halo_worker_addresses
    ]
    return {
        "url": data.halo_serve_head_url,
        "model": data.halo_serve_served_model_name,
        "launcher": data.halo_serve_launcher,
        "ray": RAY,
        "vllm": VLLM,
        "workers": workers,
        "timeout": data.halo_serve_watchdog_timeout_seconds,
        "interval": data.halo_serve_watchdog_interval_seconds,
        "misses": data.halo_serve_watchdog_misses,
        "restarts_per_hour": data.halo_serve_watchdog_max_restarts_per_hour,
        "secrets": f"{home}/{SECRETS_ENV}",
        "history": f"{home}/{HISTORY}",
        # the metrics role's Prometheus, for its VllmGenerationStalled alert: with metrics off
        # nothing listens there, the query is refused at once and the completions alone decide
        "alerts": data.halo_metrics_url,
        # with metrics.listen: all, the metrics role's 0600 file of the header Prometheus asks
        # for: read at each query (a new password needs no restart), never copied here
        "authorization": f"{home}/{path}" if (path := data.halo_metrics_authorization) else "",
        # a head not ready this long while its unit runs waits for ranks that will not come:
        # vLLM's own engine start bound, plus a restart's margin
        "down_seconds": enginestart.for_node() + enginestart.WATCHDOG_MARGIN,
    }


def files(data, home: str) -> dict[str, str]:
    """Path below the home -> text of each file the watchdog needs."""
    unit = render(
        "halo-watchdog.service.j2",
        node=data.halo_node,
        user=data.halo_cluster_user,
        program=PROGRAM,
        settings=SETTINGS,
    )
    program = Path(stallwatch.__file__).read_text()
    return {
        UNIT: unit,
        PROGRAM: program,
        SETTINGS: json.dumps(settings(data, home), indent=1, sort_keys=True) + "\n",
    }


def where(home: str) -> dict[str, str]:
    return {path: f"{home}/{path}" for path in PATHS}


def apply(user: str, snapshot, home: str) -> None:
    """On a serving cluster: write the watchdog's files and keep it running on the head, or
    remove it where it is not wanted (a worker, `serve.watchdog_enabled: false`)."""
    found = where(home)
    if not wanted(host.data):
        present = [p for p in found.values() if snapshot.exists(p)]
        if present:
            remove(user, snapshot, present, [WATCHDOG], "the stall watchdog")
        return
    changed = False
    for path, text in files(host.data, home).items():
        changed = snapshot.differs(found[path], text, "644") or changed
        text_file(name=f"Watchdog file {found[path]}", path=found[path], text=text, mode="644",
                  owner=user)  # fmt: skip
    if changed:
        user_systemctl(name="Reload the user's units", user=user, args=["daemon-reload"])
    up = running(cached(host, UserUnits, user=user, units=(WATCHDOG,)).get(WATCHDOG))
    enabling = not snapshot.exists(found[WANTS])  # into default.target: it starts at boot
    if enabling:  # `--now` starts one not running
        args = ["enable", WATCHDOG] if up else ["enable", "--now", WATCHDOG]
        user_systemctl(name=f"Enable {WATCHDOG}", user=user, args=args)
    if up and changed:
        user_systemctl(name=f"Restart {WATCHDOG}", user=user, args=["restart", WATCHDOG])
    elif not up and not enabling:
        user_systemctl(name=f"Start {WATCHDOG}", user=user, args=["start", WATCHDOG])
