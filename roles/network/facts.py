"""What the network role reads from NetworkManager besides its keyfile (a pyinfra fact)."""

from __future__ import annotations

from pyinfra.api import FactBase


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
