"""The cluster's nodes as the head sees them in this run: what it weighs and copies to."""

from __future__ import annotations

from pyinfra import host

from halo_cluster.node.pyinfra_internals import active, run


def nodes() -> list:
    """Every node this run reaches, this one first, then by name."""
    return sorted(
        (h for h in run().inventory if active(h) or h is host),
        key=lambda h: (h is not host, h.data.get("halo_node") or h.name),
    )


def unreachable() -> list[str]:
    """The nodes this run does not reach (their facts could not be read)."""
    return sorted(
        h.data.get("halo_node") or h.name
        for h in run().inventory
        if not active(h) and h is not host
    )
