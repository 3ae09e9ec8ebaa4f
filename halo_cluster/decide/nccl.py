"""Which transport NCCL/RCCL really used, read from its own INFO lines.

Decides on `via NET/<transport>` channel lines first, then `Using network <X>`; never on
`NET/Socket : Using` alone (older NCCL prints it even when it ends up on IB). Tolerates the
prefixes Ray adds (`(EngineCore pid=...) (RayWorkerProc pid=...)`), RCCL's ` comm 0x... nRanks NN`
suffix, Ray's ` [repeated Nx across cluster]`, and both `Channel 00 :` and `Channel 00/0 :`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

IB, SOCKET = "IB", "Socket"
_CHANNEL = re.compile(
    r"NCCL INFO Channel \d+(?:/\d+)? ?: .*?\[(?:send|receive)\] via NET/(?P<net>[A-Za-z]+)"
)
_NETWORK = re.compile(r"NCCL INFO Using network (?P<net>[A-Za-z]+)")
# `NET/IB : Using [0]mlx5_3:1/IB [1]mlx5_2:1/IB ...`, `NET/IB: [0] rocep3s0f0:uverbs0:1/RoCE ...`,
# `NET/IB : Made virtual device [0] name=rocep3s0f0 ...`
_IB_LINE = re.compile(r"NET/IB ?: (?P<rest>.*)")
_IB_DEVICE = re.compile(
    r"\[\d+\] ?(?P<dev>[\w.-]+?)(?::uverbs\d+)?:\d+/(?:IB|RoCE)|name=(?P<virtual>[\w.-]+)"
)


@dataclass
class Transport:
    """What the lines say: `transport` IB, Socket or None (nothing conclusive), the IB devices
    NCCL named, and the deciding line."""

    transport: str | None = None
    devices: list[str] = field(default_factory=list)
    evidence: str = ""

    @property
    def rdma(self) -> bool:
        return self.transport == IB


def parse(text: str) -> Transport:
    found = Transport()
    channel = network = None
    for line in text.splitlines():
        if ib := _IB_LINE.search(line):
            for match in _IB_DEVICE.finditer(ib["rest"]):
                device = match["dev"] or match["virtual"]
                if device not in found.devices:
                    found.devices.append(device)
        if channel is None and (match := _CHANNEL.search(line)):
            channel = (match["net"], line.strip())
        if network is None and (match := _NETWORK.search(line)):
            network = (match["net"], line.strip())
    decided = channel or network
    if decided:
        found.transport, found.evidence = decided
    return found
