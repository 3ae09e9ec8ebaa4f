"""The host-to-host Thunderbolt links as sysfs shows them: read with the Hardware fact
(facts.py) and by verify (tests/infra)."""

from __future__ import annotations

from halo_cluster.decide.safety import THUNDERBOLT_NET


def thunderbolt_links_command(sysfs: str = "/sys") -> str:
    """`tb IFNAME XDOMAIN RX_SPEED RX_LANES` for each interface thunderbolt-net drives: the
    host-to-host links themselves. Such an interface's device is an XDomain service (`0-1.0`),
    whose parent is the XDomain, the peer host (`0-1`: drivers/thunderbolt/xdomain.c
    enumerate_services, net.c tbnet_probe's SET_NETDEV_DEV), which reports that link's speed
    per lane and lanes (since 5.11); a dock or another device on the bus is no such parent, so
    a faster one never stands for the link. `-` for a value the kernel does not report."""
    return (
        f'for n in {sysfs}/class/net/*; do d=$(readlink -f "$n/device" 2>/dev/null) || continue; '
        f'[ "$(basename "$(readlink "$d/driver" 2>/dev/null)")" = {THUNDERBOLT_NET} ] || continue; '
        'x=${d%/*}; s=$(cat "$x/rx_speed" 2>/dev/null | tr -d " "); '
        'l=$(cat "$x/rx_lanes" 2>/dev/null); '
        'printf "tb %s %s %s %s\\n" "${n##*/}" "${x##*/}" "${s:--}" "${l:--}"; done'
    )


def thunderbolt_links(output: list[str]) -> list[tuple[str, str, str, str]]:
    """(interface, XDomain, rx_speed, rx_lanes) of each `tb` line of thunderbolt_links_command."""
    found = []
    for line in output:
        fields = line.split()
        if len(fields) == 5 and fields[0] == "tb":
            found.append((fields[1], fields[2], fields[3], fields[4]))
    return found
