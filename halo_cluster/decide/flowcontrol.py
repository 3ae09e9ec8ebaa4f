"""Link-level flow control (802.3x pause) on the E810, as `ethtool -a` reports it: whether the
network role applies it, and whether verify finds it on.

Why not NetworkManager's `[ethtool] pause-rx/pause-tx`: NetworkManager turns pause
autonegotiation off whenever a profile sets rx or tx (nm-device.c, `_ethtool_pause_set`: "this
implies to explicitly disable autoneg"), and ice refuses a pause request whose autoneg differs
from the link's (ice_ethtool.c, `ice_set_pauseparam`: EOPNOTSUPP, "To change autoneg please
use: ethtool -s <dev> autoneg <on|off>"), which it is on a DAC link that autonegotiates.
NetworkManager logs the failure and activates the profile anyway. `ethtool -A IF rx on tx on`
sends rx and tx only, autoneg left as the link has it, which ice takes: the role's dispatcher
script (templates/network/halo-flow-control.sh.j2) does that.

Parsed from outputs recorded on ice ports (tests/plan/fixtures/ethtool-a-*.txt).
"""

from __future__ import annotations

SWITCHES = ("on", "off")


def parse_pause(text: str) -> dict[str, str]:
    """`ethtool -a`'s switches: {"Autonegotiate": "on", "RX": "on", "TX": "on", "RX negotiated":
    "on", ...}; {} when it printed none (a driver without pause support, as the lab's veth).
    The title line and `--include-statistics` counters are left out."""
    found = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and not line[:1].isspace() and value.strip() in SWITCHES:
            found[key.strip()] = value.strip()
    return found


def applied(pause: dict[str, str]) -> bool:
    """Pause frames sent and honoured: RX and TX on."""
    return pause.get("RX") == "on" and pause.get("TX") == "on"


def describe(pause: dict[str, str]) -> str:
    """`RX on TX off (autoneg on)`, for a check's line."""
    return (
        f"RX {pause.get('RX', '?')} TX {pause.get('TX', '?')} "
        f"(autoneg {pause.get('Autonegotiate', '?')})"
    )
