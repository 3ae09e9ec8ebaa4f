"""`python -m lab throttle --rate 2MB/s` (`--rate off` ends it): the lab's registry and hub send
at most that, so that a pull or a download lasts long enough to show its progress (docs/lab.md).

The rate is stored in the lab's folder (RATE_FILE), which the hub (lab/hubserver.py) reads before
each chunk it sends; the registry, distribution's own binary on each node at 127.0.0.1:5000, is
paced by the kernel instead: an HTB class on the node's loopback for what port 5000 sends."""

from __future__ import annotations

import re
from pathlib import Path

from lab import network, sh
from lab.sh import LabError

RATE_FILE = "throttle"  # in the lab's folder: the rate in bytes per second
REGISTRY_PORT = 5000
RATE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmg]?)b/s", re.IGNORECASE)
FACTORS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}  # as a link's rate is said: decimal


def parse_rate(text: str) -> int | None:
    """Bytes per second from `2MB/s`, `500KB/s`, `1.5MB/s`; None for `off`."""
    if text.strip().lower() == "off":
        return None
    found = RATE.fullmatch(text.strip())
    per_second = float(found[1]) * FACTORS[found[2].lower()] if found else 0
    if per_second < 1:
        raise LabError(f"throttle --rate {text!r}: give a rate such as 2MB/s or 500KB/s, or off")
    return int(per_second)


def current(path: Path) -> int | None:
    """The stored rate, None when there is none (or it cannot be read: a server never fails
    for it)."""
    try:
        return int(path.read_text().strip()) or None
    except (OSError, ValueError):
        return None


def throttle(lab_dir: Path, nodes: list[str], per_second: int | None) -> None:
    """Store the rate (or remove it) and pace each node's registry to it."""
    path = lab_dir / RATE_FILE
    if per_second is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(f"{per_second}\n")
    for node in nodes:
        tc = ("tc", "-n", network.netns(node))
        sh.run(*tc, "qdisc", "del", "dev", "lo", "root", check=False)  # none there: fine
        if per_second is None:
            continue
        # unmatched traffic (Ray, vLLM, the health checks) goes to a class that does not exist:
        # HTB then sends it unshaped
        sh.run(*tc, "qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb", "default", "99")
        bits = f"{per_second * 8}bit"
        shaped = ("htb", "rate", bits, "ceil", bits)
        sh.run(*tc, "class", "add", "dev", "lo", "parent", "1:", "classid", "1:1", *shaped)
        port = ("u32", "match", "ip", "sport", str(REGISTRY_PORT), "0xffff", "flowid", "1:1")
        sh.run(*tc, "filter", "add", "dev", "lo", "parent", "1:", "protocol", "ip", *port)
