"""The data link, persisted through NetworkManager: one keyfile per node, activated on change."""

from pyinfra import host
from pyinfra.api import deploy

from halo_cluster.facts import NetworkInterfaces, NmActiveConnections, TextFiles
from halo_cluster.operations import activate_connection, text_file
from halo_cluster.render import render

CONNECTIONS = "/etc/NetworkManager/system-connections"
THUNDERBOLT_MODULES = "/etc/modules-load.d/thunderbolt-net.conf"

DEFAULTS = {
    "halo_interconnect": "roce",
    "halo_mtu": 9000,
    "halo_nm_connection": "halo-data",
    "halo_data_prefix": 30,
    "halo_data_mac": None,
}


def keyfile_path() -> str:
    return f"{CONNECTIONS}/{host.data.halo_nm_connection}.nmconnection"


@deploy("Data link", data_defaults=DEFAULTS)
def data_link(interface: str | None) -> None:
    """`interface`: the resolved data interface, None when it is not there yet (thunderbolt0)."""
    keyfile = keyfile_path()
    thunderbolt = host.data.halo_interconnect == "thunderbolt"
    paths = (keyfile, THUNDERBOLT_MODULES) if thunderbolt else (keyfile,)
    current = host.get_fact(TextFiles, paths=paths)

    if thunderbolt:
        text_file(
            name="Load thunderbolt_net at boot",
            path=THUNDERBOLT_MODULES,
            text=render("thunderbolt-net.conf.j2", interface=host.data.halo_data_interface),
            current=_text(current, THUNDERBOLT_MODULES),
        )

    wanted = render(
        "halo-data.nmconnection.j2",
        node=host.data.halo_node,
        interconnect=host.data.halo_interconnect,
        connection=host.data.halo_nm_connection,
        uuid=host.data.halo_nm_uuid,
        interface=None if host.data.halo_data_mac else interface or host.data.halo_data_interface,
        mac=host.data.halo_data_mac,
        mtu=host.data.halo_mtu,
        address=host.data.halo_data_address,
        prefix=host.data.halo_data_prefix,
    )
    # NetworkManager ignores a keyfile that others can read: one with another mode counts as absent
    present = _text(current, keyfile) if _mode(current, keyfile) == "600" else None
    text_file(
        name=f"NetworkManager profile {keyfile}",
        path=keyfile,
        text=wanted,
        current=present,
        mode="600",
    )

    if interface and (present != wanted or not _live(interface)):
        connection = host.data.halo_nm_connection
        activate_connection(name=f"Activate {connection} on {interface}", connection=connection)


def _live(interface: str) -> bool:
    """The profile is up on the interface with the configured MTU and address (someone may have
    changed them by hand, behind NetworkManager's back)."""
    active = host.get_fact(NmActiveConnections).get(host.data.halo_nm_connection) == interface
    link = host.get_fact(NetworkInterfaces).get(interface, {})
    address = f"{host.data.halo_data_address}/{host.data.halo_data_prefix}"
    return active and link.get("mtu") == host.data.halo_mtu and address in link.get("addresses", [])


def _text(files: dict, path: str) -> str | None:
    return files[path].text if path in files else None


def _mode(files: dict, path: str) -> str | None:
    return files[path].mode if path in files else None
