"""The data link, persisted through NetworkManager: one keyfile per node, activated on change."""

from pyinfra import host
from pyinfra.api import deploy

from halo_cluster.node import firewalld
from halo_cluster.node.context import NodeContext
from halo_cluster.node.facts import Firewalld, NetworkInterfaces
from halo_cluster.node.nodefiles import cached, node_files
from halo_cluster.node.operations import text_file
from halo_cluster.node.render import templates
from halo_cluster.roles.network.facts import NmActiveConnections
from halo_cluster.roles.network.operations import activate_connection

render = templates(__name__)  # templates/network/

ORDER = 30
PACKAGES = ()
CONNECTIONS = "/etc/NetworkManager/system-connections"
THUNDERBOLT_MODULES = "/etc/modules-load.d/thunderbolt-net.conf"


def keyfile_string(value: str) -> str:
    """A string as a GLib key file holds it: NetworkManager reads `\\s`, `\\n`, `\\t`, `\\r` and
    `\\\\` in a value as escapes (and refuses any other), so a backslash is written doubled; the
    rules keep white space and line breaks out of the values written here."""
    return value.replace("\\", "\\\\")


def keyfile(data) -> str:
    return f"{CONNECTIONS}/{data.halo_network_connection}.nmconnection"


def paths(data) -> tuple[str, ...]:
    return (keyfile(data), THUNDERBOLT_MODULES)


def reads(data) -> tuple[tuple[type, dict], ...]:
    return ((NmActiveConnections, {}), (NetworkInterfaces, {}), (Firewalld, {}))


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

    bound = None if host.data.halo_data_mac else node.data_interface
    wanted = render(
        "halo-data.nmconnection.j2",
        node=host.data.halo_node,
        interconnect=host.data.halo_interconnect,
        connection=host.data.halo_network_connection,
        uuid=host.data.halo_network_uuids[host.data.halo_node],
        interface=bound and keyfile_string(bound),
        mac=host.data.halo_data_mac,
        mtu=host.data.halo_mtu,
        address=host.data.halo_data_address,
        prefix=host.data.halo_data_prefix,
    )
    path = keyfile(host.data)
    # NetworkManager ignores a keyfile that others can read: text_file rewrites one of another mode
    changed = node_files(host).differs(path, wanted, "600")
    text_file(name=f"NetworkManager profile {path}", path=path, text=wanted, mode="600")

    if interface and (changed or not _live(interface)):
        connection = host.data.halo_network_connection
        activate_connection(name=f"Activate {connection} on {interface}", connection=connection)


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
