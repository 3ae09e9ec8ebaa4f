"""The metrics role's reads: the states of the services it runs, the system's node_exporter
and the cluster user's Prometheus."""

from __future__ import annotations

import shlex
from typing import TypedDict

from pyinfra.api import FactBase

from halo_cluster.node.facts import as_user


class UnitState(TypedDict):
    active: str  # ActiveState: active, inactive, failed, ...
    enabled: str  # UnitFileState: enabled, disabled, generated (a quadlet's), ...


class Units(FactBase[dict[str, UnitState]]):
    """ActiveState and UnitFileState of systemd units, by unit name without `.service`: the
    system's, or with `user` that user's (empty when its manager is not running)."""

    @staticmethod
    def default() -> dict[str, UnitState]:
        return {}

    def command(self, units: tuple[str, ...], user: str = "") -> str:
        names = " ".join(shlex.quote(f"{unit}.service") for unit in units)
        scope = "--user " if user else ""
        show = f"systemctl {scope}show --property=Id,ActiveState,UnitFileState {names}"
        return f"{as_user(user, show) if user else show} 2>/dev/null || true"

    def process(self, output: list[str]) -> dict[str, UnitState]:
        found: dict[str, UnitState] = {}
        unit = ""
        for line in output:
            key, _, value = line.strip().partition("=")
            if key == "Id":
                unit = value.removesuffix(".service")
                found[unit] = UnitState(active="", enabled="")
            elif unit and key == "ActiveState":
                found[unit]["active"] = value
            elif unit and key == "UnitFileState":
                found[unit]["enabled"] = value
        return found
