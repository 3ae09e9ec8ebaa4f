"""firewalld as the deploy sees it: which zone an interface is in, which ports a zone lets in
(the network and firewall roles and the checks read it; the firewall role's operations are in
roles/firewall/operations.py).

Decisions read the Firewalld fact (firewalldfact.py); nothing here reads a node by itself.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

DATA_ZONE = "trusted"  # the data link's zone, set by its NetworkManager profile (as the guide)
# zones that let every port in, whatever their port list says
OPEN_TARGETS = ("ACCEPT",)
OPEN_ZONES = (DATA_ZONE,)
# a rich rule with no match but its action, for either family: whatever the zone does not let in
# by its own lists is refused, so an ACCEPT target accepts only what is forwarded through the host
# (libvirt's and NetworkManager's shared zones: `rule priority="32767" reject`)
BARE_REFUSAL = re.compile(r'rule( priority="-?\d+")? (reject|drop)( type="[\w-]+")?')


def running(state: dict) -> bool:
    return state.get("state") == "running"


def zone_of(state: dict, interface: str) -> str:
    """The zone an interface is in now: the zone that names it, else the default zone."""
    for zone, settings in state.get("runtime", {}).items():
        if interface in settings.get("interfaces", []):
            return zone
    return state.get("default", "")


def management_zones(state: dict, ssh_interfaces, data_interface: str | None) -> set[str]:
    """The zones of the interfaces SSH reaches the node by, the data link and loopback aside."""
    return {
        zone_of(state, interface)
        for interface in ssh_interfaces
        if interface not in (data_interface, "lo")
    }


def zones_in_effect(state: dict, interfaces, data_interface: str | None) -> dict[str, list[str]]:
    """Every zone traffic can reach this node through, with what puts it there: the zone of
    each interface but loopback and the data link (one in no zone is in the default zone), and
    each zone with a source, whose traffic it takes on any interface (now or after a reload)."""
    found: dict[str, list[str]] = {}
    for interface in sorted(interfaces):
        if interface not in (data_interface, "lo"):
            found.setdefault(zone_of(state, interface), []).append(interface)
    for view in ("runtime", "permanent"):
        for zone, settings in state.get(view, {}).items():
            for source in settings.get("sources", []):
                if f"source {source}" not in found.get(zone, []):
                    found.setdefault(zone, []).append(f"source {source}")
    return dict(sorted(found.items()))


def port_entries(state: dict, zone: str, ports: list[int]) -> list[str]:
    """A zone's port entries (`1025-65535/tcp`) that let any of `ports` in, in either view."""
    entries = {
        entry
        for view in ("runtime", "permanent")
        for entry in state.get(view, {}).get(zone, {}).get("ports", [])
        if open_ports({"ports": [entry]}, ports)
    }
    return sorted(entries)


def zones_with_service(state: dict, service: str, view: str) -> set[str]:
    return {z for z, s in state.get(view, {}).items() if service in s.get("services", [])}


def open_ports(settings: dict, ports: list[int]) -> list[int]:
    """Which of `ports` (TCP) a zone lets in by its target (unless a bare rich rule refuses the
    rest) or its port list (services aside)."""
    refuses_rest = any(BARE_REFUSAL.fullmatch(rule) for rule in settings.get("rich rules", []))
    if settings.get("target", [""])[0] in OPEN_TARGETS and not refuses_rest:
        return list(ports)
    ranges = [_port_range(entry) for entry in settings.get("ports", [])]
    return [p for p in ports if any(low <= p <= high for low, high in ranges if low)]


def _port_range(entry: str) -> tuple[int, int]:
    """'8000/tcp' -> (8000, 8000); '1025-65535/tcp' -> (1025, 65535); UDP -> (0, 0)."""
    ports, _, protocol = entry.partition("/")
    if protocol != "tcp":
        return 0, 0
    low, _, high = ports.partition("-")
    return int(low), int(high or low)


def exposed_in(state: dict, zone: str, ports: list[int]) -> list[int]:
    """Ports of `ports` a zone lets in, at runtime or after the next reload."""
    if zone in OPEN_ZONES:
        return list(ports)
    found = set()
    for view in ("runtime", "permanent"):
        found.update(open_ports(state.get(view, {}).get(zone, {}), ports))
    return sorted(found)


# Reading firewalld without firewall-cmd (the Firewalld fact, facts.py): the runtime view from
# its D-Bus replies (busctl's JSON), the permanent view from its zone files. Both give a zone's
# settings under `firewall-cmd --list-all-zones`'s keys, each a list of strings.

# firewalld's zone settings dict (getZoneSettings2's a{sv}, io/zone.py IMPORT_EXPORT_STRUCTURE)
# -> firewall-cmd's key
_LISTS = {
    "rules_str": "rich rules",
    "services": "services",
    "interfaces": "interfaces",
    "sources": "sources",
    "protocols": "protocols",
    "icmp_blocks": "icmp-blocks",
}
_PAIRS = {"ports": "ports", "source_ports": "source-ports"}  # a(ss): (port, protocol)
_FLAGS = {
    "forward": "forward",
    "masquerade": "masquerade",
    "icmp_block_inversion": "icmp-block-inversion",
}
_NUMBERS = {"ingress_priority": "ingress-priority", "egress_priority": "egress-priority"}
_SORTED = ("services", "interfaces", "protocols")  # the lists firewall-cmd printed sorted
_NAMED = {"service": "services", "interface": "interfaces", "icmp-block": "icmp-blocks"}
# firewalld's zone files: its own, and the administrator's, which replace them by name
USR_ZONES = "/usr/lib/firewalld/zones"
ETC_ZONES = "/etc/firewalld/zones"
# a zone file without a target, or with this placeholder, has firewalld's default target
_DEFAULT_TARGETS = ("", "default", "{chain}_{zone}")


def _empty_settings() -> dict[str, list[str]]:
    settings: dict[str, list[str]] = {"target": ["default"]}
    settings.update({key: [] for key in (*_LISTS.values(), *_PAIRS.values(), "forward-ports")})
    # firewalld omits false flags from a{sv}, and a zone file without the element is off
    settings.update({key: ["no"] for key in _FLAGS.values()})
    settings.update({key: ["0"] for key in _NUMBERS.values()})
    return settings


def _forward_port(port: str, protocol: str, to_port: str, to_addr: str) -> str:
    return f"port={port}:proto={protocol}:toport={to_port}:toaddr={to_addr}"


def busctl_data(reply: str) -> list:
    """The values of one `busctl --json=short call` reply: {"type": SIG, "data": [values]}."""
    return json.loads(reply)["data"]


def runtime_settings(reply: str) -> dict[str, list[str]]:
    """A zone's settings from busctl's JSON reply to getZoneSettings2 (out signature a{sv}):
    each value a variant {"type": SIG, "data": value}; firewalld leaves out empty lists."""
    settings = _empty_settings()
    for key, variant in busctl_data(reply)[0].items():
        value = variant["data"]
        if key == "target":
            settings["target"] = ["default" if value in _DEFAULT_TARGETS else value]
        elif key in _LISTS:
            settings[_LISTS[key]] = sorted(value) if _LISTS[key] in _SORTED else list(value)
        elif key in _PAIRS:
            settings[_PAIRS[key]] = [f"{port}/{protocol}" for port, protocol in value]
        elif key == "forward_ports":
            settings["forward-ports"] = [_forward_port(*entry) for entry in value]
        elif key in _FLAGS:
            settings[_FLAGS[key]] = ["yes" if value else "no"]
        elif key in _NUMBERS:
            settings[_NUMBERS[key]] = [str(value)]
    return settings


def zone_file_settings(text: str) -> dict[str, list[str]] | None:
    """A zone's settings from its XML file as firewalld reads it (core/io/zone.py); None for a
    file firewalld would skip: not XML, not a zone, an element without a required attribute."""
    try:
        root = ET.fromstring(text)
        if root.tag != "zone":
            return None
        return _zone_file_settings(root)
    except (ET.ParseError, KeyError):
        return None


def _zone_file_settings(root: ET.Element) -> dict[str, list[str]]:
    settings = _empty_settings()
    target = root.get("target", "")
    settings["target"] = ["default" if target in _DEFAULT_TARGETS else target]
    for attribute in ("ingress-priority", "egress-priority"):
        if root.get(attribute):
            settings[attribute] = [root.get(attribute, "0")]
    # the zone's own elements only: a rich rule's <service>, <port>, <source>... are the rule's
    for child in root:
        entry = _zone_file_entry(child.tag, child.attrib)
        if entry:
            key, value = entry
            if value not in settings[key]:
                settings[key].append(value)
        elif child.tag in ("forward", "masquerade", "icmp-block-inversion"):
            settings[child.tag] = ["yes"]
        elif child.tag == "rule" and _bare_rule(child):
            settings["rich rules"].append(_bare_rule(child))
    for key in _SORTED:
        settings[key].sort()
    return settings


def _bare_rule(rule: ET.Element) -> str | None:
    """A zone file's rich rule of an action alone, as firewalld prints it (core/rich.py
    Rich_Rule.__str__: `rule [priority=] [family=] ACTION`); None for a rule with a match (a
    source, a service, a port, ...) or a limit, which the permanent view leaves out: nothing
    decides on them."""
    actions = [c for c in rule if c.tag in ("accept", "reject", "drop") and not len(c)]
    if len(actions) != len(rule) or len(actions) != 1:
        return None
    words = ["rule"]
    if int(rule.get("priority") or 0):
        words.append(f'priority="{int(rule.get("priority") or 0)}"')
    if rule.get("family"):
        words.append(f'family="{rule.get("family")}"')
    action = actions[0]
    words.append(action.tag + (f' type="{action.get("type")}"' if action.get("type") else ""))
    return " ".join(words)


def _zone_file_entry(tag: str, attrs: dict[str, str]) -> tuple[str, str] | None:
    """(settings key, entry) for one list element of a zone file; None for any other."""
    if tag in _NAMED:
        return _NAMED[tag], attrs["name"]
    if tag in ("port", "source-port"):
        # firewalld stores a range as low-high whichever separator the file used
        port = attrs["port"].replace(":", "-")
        return ("ports" if tag == "port" else "source-ports"), f"{port}/{attrs['protocol']}"
    if tag == "protocol":
        return "protocols", attrs["value"]
    if tag == "source":
        return "sources", f"ipset:{attrs['ipset']}" if "ipset" in attrs else attrs["address"]
    if tag == "forward-port":
        return "forward-ports", _forward_port(
            attrs["port"].replace(":", "-"),
            attrs["protocol"],
            attrs.get("to-port", "").replace(":", "-"),
            attrs.get("to-addr", ""),
        )
    return None


def permanent_zones(files: dict[str, str]) -> dict[str, dict[str, list[str]]]:
    """The permanent view from zone files {path: text}, as firewalld loads them (core/fw.py):
    USR_ZONES/NAME.xml, each replaced by ETC_ZONES/NAME.xml, and ETC_ZONES/NAME/PART.xml as zone
    NAME/PART (firewalld combines those into NAME at runtime). A file firewalld would skip is
    skipped, leaving the one it would have replaced."""
    zones: dict[str, dict[str, list[str]]] = {}
    for folder in (USR_ZONES, ETC_ZONES):
        for path, text in sorted(files.items()):
            name = path.removeprefix(f"{folder}/")
            if name == path or not name.endswith(".xml") or name.count("/") > (folder == ETC_ZONES):
                continue
            settings = zone_file_settings(text)
            if settings is not None:
                zones[name.removesuffix(".xml")] = settings
    return dict(sorted(zones.items()))
