"""The data link, persisted through NetworkManager: one keyfile per node, activated on change;
on the E810, link-level flow control applied by a dispatcher script."""

import shlex

from pyinfra import host, logger
from pyinfra.api import deploy
from pyinfra.operations import server

from halo_cluster.decide import flowcontrol
from halo_cluster.decide.safety import THUNDERBOLT_NET
from halo_cluster.node import firewalld
from halo_cluster.node.context import NodeContext
from halo_cluster.node.facts import NetworkInterfaces
from halo_cluster.node.firewalldfact import Firewalld
from halo_cluster.node.nodefiles import cached, node_files
from halo_cluster.node.operations import text_file
from halo_cluster.node.render import templates
from halo_cluster.roles.network.facts import NmActiveConnections, NmProfiles
from halo_cluster.roles.network.operations import activate_connection
from halo_cluster.roles.network.profiles import competing, described

render = templates(__name__)  # templates/network/

ORDER = 30
PACKAGES = ()
CONNECTIONS = "/etc/NetworkManager/system-connections"
THUNDERBOLT_MODULES = "/etc/modules-load.d/thunderbolt-net.conf"
# NetworkManager runs it after each activation; it runs only root-owned scripts no one else may
# write, hence root 0755
FLOW_CONTROL = "/etc/NetworkManager/dispatcher.d/90-halo-flow-control.sh"
# above every profile that may also autoconnect on the data port: 0 is NetworkManager's default,
# -999 its own default profiles'; ours wins without changing theirs
AUTOCONNECT_PRIORITY = 100


def keyfile_string(value: str) -> str:
    """A string as a GLib key file holds it: NetworkManager reads `\\s`, `\\n`, `\\t`, `\\r` and
    `\\\\` in a value as escapes (and refuses any other), so a backslash is written doubled; the
    rules keep white space and line breaks out of the values written here."""
    return value.replace("\\", "\\\\")


def keyfile(data) -> str:
    return f"{CONNECTIONS}/{data.halo_network_connection}.nmconnection"


def paths(data) -> tuple[str, ...]:
    return (keyfile(data), THUNDERBOLT_MODULES, FLOW_CONTROL)


def reads(data) -> tuple[tuple[type, dict], ...]:
    return ((NmActiveConnections, {}), (NmProfiles, {}), (NetworkInterfaces, {}), (Firewalld, {}))


@deploy("Data link")
def apply(node: NodeContext) -> None:
    """`node.interface`: the resolved data interface, None when it is not there yet."""
    interface = node.interface
    if host.data.halo_interconnect == "thunderbolt":
        text_file(
            name=f"Load thunderbolt_net at boot in {THUNDERBOLT_MODULES}",
            path=THUNDERBOLT_MODULES,
            text=render("thunderbolt-net.conf.j2", interface=host.data.halo_data_interface),
        )
    else:
        text_file(
            name=f"Flow control at each activation: {FLOW_CONTROL}",
            path=FLOW_CONTROL,
            text=render("halo-flow-control.sh.j2", connection=host.data.halo_network_connection),
            mode="755",
        )

    driver = _thunderbolt_link(node)
    bound = None if host.data.halo_data_mac or driver else node.data_interface
    wanted = render(
        "halo-data.nmconnection.j2",
        node=host.data.halo_node,
        interconnect=host.data.halo_interconnect,
        connection=host.data.halo_network_connection,
        uuid=host.data.halo_network_uuids[host.data.halo_node],
        interface=bound and keyfile_string(bound),
        driver=driver,
        mac=host.data.halo_data_mac,
        priority=AUTOCONNECT_PRIORITY,
        dispatcher=FLOW_CONTROL,
        mtu=host.data.halo_mtu,
        address=host.data.halo_data_address,
        prefix=host.data.halo_data_prefix,
    )
    path = keyfile(host.data)
    # NetworkManager ignores a keyfile that others can read: text_file rewrites one of another mode
    changed = node_files(host).differs(path, wanted, "600")
    text_file(name=f"NetworkManager profile {path}", path=path, text=wanted, mode="600")

    _say_competing(node.data_interface)
    connection = host.data.halo_network_connection
    if interface and (changed or not _live(interface)):
        # NetworkManager runs the flow control script once the profile is up
        activate_connection(name=f"Activate {connection} on {interface}", connection=connection)
    elif interface and host.data.halo_interconnect == "roce":
        _flow_control(node, interface, connection)


def _thunderbolt_link(node: NodeContext) -> str | None:
    """thunderbolt-net's driver name when the profile binds to the host-to-host link itself:
    thunderbolt-net names its interfaces in the order they come (thunderbolt1 when a dock's link
    came first), so a name would miss it; bound by MAC, or on an interface of another driver
    named so (the lab's veth), the binding stays as configured."""
    if host.data.halo_interconnect != "thunderbolt" or host.data.halo_data_mac:
        return None
    found = node.interfaces.get(node.interface or "")
    return THUNDERBOLT_NET if found is None or found["driver"] == THUNDERBOLT_NET else None


def _flow_control(node: NodeContext, interface: str, connection: str) -> None:
    """Run the dispatcher script when the port reports pause off (someone turned it off, or the
    script was not there at the last activation); a port without pause support reports nothing
    (the lab's veth) and is left as it is."""
    pause = node.hardware.get("pause") or {}
    if pause and not flowcontrol.applied(pause):
        q = shlex.quote
        server.shell(
            name=f"Flow control on {interface}: {flowcontrol.describe(pause)} -> RX on TX on",
            commands=[f"CONNECTION_ID={q(connection)} {FLOW_CONTROL} {q(interface)} up"],
        )


def _say_competing(port: str | None) -> None:
    """Name the other profiles that may take the data port: ours outranks them by its
    autoconnect-priority, and they are left as they are (never deleted or changed)."""
    others = competing(cached(host, NmProfiles), port, host.data.halo_network_connection)
    if port and others:
        said = described(others, port, AUTOCONNECT_PRIORITY)
        logger.info(f"{host.print_prefix}other profiles on {port}, left as they are: {said}")


def _live(interface: str) -> bool:
    """The profile is up on the interface with the configured MTU and address, and in firewalld's
    trusted zone where firewalld runs (someone may have changed them behind NetworkManager's back;
    activating the profile again puts them back)."""
    connection = host.data.halo_network_connection
    active = cached(host, NmActiveConnections).get(connection) == interface
    link = cached(host, NetworkInterfaces).get(interface, {})
    address = f"{host.data.halo_data_address}/{host.data.halo_data_prefix}"
    addressed = link.get("mtu") == host.data.halo_mtu and address in link.get("addresses", [])
    return active and addressed and _trusted(interface)


def _trusted(interface: str) -> bool:
    state = cached(host, Firewalld)
    return (
        not firewalld.running(state) or firewalld.zone_of(state, interface) == firewalld.DATA_ZONE
    )
