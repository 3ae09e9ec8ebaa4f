"""The cluster's nodes as the head sees them in this run: what it weighs and copies to."""

from __future__ import annotations

from pyinfra import host
from pyinfra.context import ctx_state


def nodes() -> list:
    """Every node this run reaches, this one first, then by name."""
    state = ctx_state.get()
    return sorted(
        (h for h in state.inventory if h in state.active_hosts or h is host),
        key=lambda h: (h is not host, h.data.get("halo_node") or h.name),
    )


def unreachable() -> list[str]:
    """The nodes this run does not reach (their facts could not be read)."""
    state = ctx_state.get()
    return sorted(
        h.data.get("halo_node") or h.name
        for h in state.inventory
        if h not in state.active_hosts and h is not host
    )
