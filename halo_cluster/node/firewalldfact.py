"""The Firewalld fact: firewalld's zones as the deploy reads them, runtime over D-Bus and
permanent from the zone files (the decisions on them: firewalld.py)."""

from __future__ import annotations

from typing import TypedDict

from pyinfra.api import FactBase

from halo_cluster.node import firewalld

FIREWALLD_BUS = "org.fedoraproject.FirewallD1"  # its D-Bus name and interface


ZoneSettings = dict[str, list[str]]


class FirewalldZones(TypedDict):
    state: str  # "running", "not running" or "absent"
    default: str  # the default zone ("" unless running)
    runtime: dict[str, ZoneSettings]  # zone -> settings, from firewalld over D-Bus
    permanent: dict[str, ZoneSettings]  # zone -> settings, from its zone files


class Firewalld(FactBase[FirewalldZones]):
    """firewalld's zones, runtime and permanent (`FirewalldZones`), where settings
    maps `firewall-cmd --list-all-zones` keys (target, interfaces, sources, services, ports,
    protocols, forward, masquerade, forward-ports, source-ports, icmp-block-inversion,
    icmp-blocks, ingress-priority, egress-priority, rich rules: all at runtime, a zone file's
    of an action alone) to lists.

    Read without firewall-cmd, a Python start of 0.4-0.6 s per call on the node: the runtime
    view from firewalld itself over D-Bus with busctl (getDefaultZone answers: running), the
    permanent view from its zone files (firewalld.py). firewalld reads those at its start and
    reload, which are when the permanent view takes effect; "--permanent" changes write them at
    once.
    """

    @staticmethod
    def default() -> FirewalldZones:
        return FirewalldZones(state="absent", default="", runtime={}, permanent={})

    def command(self) -> str:
        zone_files = (
            f"{firewalld.USR_ZONES}/*.xml {firewalld.ETC_ZONES}/*.xml {firewalld.ETC_ZONES}/*/*.xml"
        )
        # sh may be dash, whose echo reads backslashes in the JSON: printf. --auto-start=no:
        # asking must never start a stopped firewalld. Zone names are letters, digits and
        # _-/ only (firewalld checks them), so the JSON list of them splits at its commas.
        return (
            "command -v firewall-cmd >/dev/null || { echo 'state absent'; exit 0; }; "
            "fw() { busctl --system --auto-start=no --json=short call "
            f'{FIREWALLD_BUS} /org/fedoraproject/FirewallD1 "{FIREWALLD_BUS}$@"; }}; '
            "default=$(fw '' getDefaultZone 2>/dev/null) || { echo 'state not running'; exit 0; }; "
            "zones=$(fw .zone getZones) || exit 1; "
            "echo 'state running'; printf 'default %s\\n' \"$default\"; "
            "zones=${zones#*'[['}; zones=${zones%']]'*}; IFS=,; set -- $zones; unset IFS; "
            "for z; do z=${z#'\"'}; z=${z%'\"'}; "
            's=$(fw .zone getZoneSettings2 s "$z") || exit 1; '
            'printf \'runtime %s %s\\n\' "$z" "$s"; done; '
            f"grep -aH '' {zone_files} 2>/dev/null; true"
        )

    def process(self, output: list[str]) -> FirewalldZones:
        found = self.default()
        files: dict[str, list[str]] = {}
        for line in output:
            kind, _, rest = line.partition(" ")
            if line.startswith("/"):
                path, _, text = line.partition(":")
                files.setdefault(path, []).append(text)
            elif kind == "state":
                found["state"] = rest.strip()
            elif kind == "default":
                found["default"] = firewalld.busctl_data(rest)[0]
            elif kind == "runtime":
                zone, _, reply = rest.partition(" ")
                found["runtime"][zone] = firewalld.runtime_settings(reply)
        found["runtime"] = dict(sorted(found["runtime"].items()))
        found["permanent"] = firewalld.permanent_zones(
            {path: "\n".join(lines) for path, lines in files.items()}
        )
        return found
