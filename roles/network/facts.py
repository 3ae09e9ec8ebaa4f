"""What the network role reads from NetworkManager besides its keyfile (a pyinfra fact)."""

from __future__ import annotations

from typing import TypedDict

from pyinfra.api import FactBase

ETHERNET = "802-3-ethernet"  # a profile's type as `nmcli -t` prints it
SETTINGS = ("interface-name", "autoconnect", "autoconnect-priority")  # NmProfiles reads


class NmActiveConnections(FactBase[dict[str, str]]):
    """Active NetworkManager connections: {connection name: device}."""

    @staticmethod
    def default() -> dict[str, str]:
        return {}

    def requires_command(self) -> str:
        return "nmcli"

    def command(self) -> str:
        return "nmcli -t -f NAME,DEVICE connection show --active"

    def process(self, output: list[str]) -> dict[str, str]:
        active = {}
        for line in output:
            # nmcli -t escapes ':' inside fields as '\:'
            name, _, device = line.replace("\\:", "\0").rpartition(":")
            active[name.replace("\0", ":")] = device
        return active


class Profile(TypedDict):
    """One NetworkManager profile and what binds it to a port."""

    uuid: str
    name: str
    type: str  # as `nmcli -t` prints it: 802-3-ethernet, infiniband, ...
    device: str  # where it is active ("" nowhere)
    interface: str  # connection.interface-name ("" any port of its type, or bound by MAC)
    autoconnect: bool
    priority: int  # connection.autoconnect-priority


def unescape(field: str) -> str:
    """A field of `nmcli -t`, which writes ':' as '\\:' and '\\' as '\\\\'."""
    return field.replace("\\\\", "\0").replace("\\:", ":").replace("\0", "\\")


class NmProfiles(FactBase[list[Profile]]):
    """Every NetworkManager profile, in memory ones too (NetworkManager's own default profiles
    have no file): the listing, then each one's binding and autoconnect settings."""

    @staticmethod
    def default() -> list[Profile]:
        return []

    def requires_command(self) -> str:
        return "nmcli"

    def command(self) -> str:
        # UUID first: it holds no ':', so each line's UUID is what precedes its first one
        settings = ",".join(f"connection.{k}" for k in SETTINGS)
        return (
            "nmcli -t -f UUID,TYPE,DEVICE,NAME connection show | while IFS= read -r line; do "
            'printf "profile %s\\n" "$line"; '
            f'nmcli -t -f {settings} connection show uuid "${{line%%:*}}" | sed "s/^/setting /"; '
            "done"
        )

    def process(self, output: list[str]) -> list[Profile]:
        profiles: list[Profile] = []
        for line in output:
            kind, _, rest = line.partition(" ")
            if kind == "profile":
                uuid, kind_, device, name = [*rest.split(":", 3), "", "", ""][:4]
                profiles.append(
                    Profile(
                        uuid=uuid,
                        name=unescape(name),
                        type=kind_,
                        device=device,
                        interface="",
                        autoconnect=True,
                        priority=0,
                    )
                )
            elif kind == "setting" and profiles:
                key, _, value = rest.partition(":")
                value = unescape(value)
                if key == "connection.interface-name":
                    profiles[-1]["interface"] = value
                elif key == "connection.autoconnect":
                    profiles[-1]["autoconnect"] = value == "yes"
                elif key == "connection.autoconnect-priority" and value.lstrip("-").isdigit():
                    profiles[-1]["priority"] = int(value)
        return profiles
