"""The other NetworkManager profiles that may take the data port: the upstream guide's own
profile, NetworkManager's default profile of the port, a link-local `thunderbolt0` one. Ours
outranks them by `autoconnect-priority`; theirs are named in the deploy's log and never changed
or deleted (they are the user's)."""

from __future__ import annotations

from halo_cluster.roles.network.facts import ETHERNET, Profile


def competing(profiles: list[Profile], port: str | None, ours: str) -> list[Profile]:
    """The profiles other than `ours` that are active on `port`, bound to it by name, or bound
    to no port at all (an Ethernet profile without interface-name autoconnects on any Ethernet
    port, or on the one of its MAC, which the listing does not show)."""
    if not port:
        return []
    found = []
    for profile in profiles:
        if profile["name"] == ours:
            continue
        here = port in (profile["device"], profile["interface"])
        unbound = not profile["interface"] and profile["type"] == ETHERNET
        if here or (unbound and profile["autoconnect"] and not profile["device"]):
            found.append(profile)
    return found


def described(profiles: list[Profile], port: str, priority: int) -> str:
    """`'thunderbolt0' (active on thunderbolt0, autoconnect priority 0), ...`."""
    parts = []
    for profile in profiles:
        if profile["device"] == port:
            where = f"active on {port}"
        elif profile["interface"] == port:
            where = f"bound to {port}"
        elif profile["device"]:
            where = f"active on {profile['device']}"
        else:
            where = "any Ethernet port"
        if not profile["autoconnect"]:
            how = "no autoconnect"
        elif profile["priority"] >= priority:
            how = f"autoconnect priority {profile['priority']}, not below ours ({priority})"
        else:
            how = f"autoconnect priority {profile['priority']}"
        parts.append(f"{profile['name']!r} ({where}, {how})")
    return ", ".join(parts)
