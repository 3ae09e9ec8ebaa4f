"""A node removed from cluster.yml leaves the cluster: the container derivation moves it to the
lock's `left`; here the head asks each departed node over the data link whether our services
are still there (`DepartedServices`, in the head's one read) and takes them out
(`leave_cluster`), with one line per departed node saying what was done on it. With
`serve.launcher: native` no Ray token keeps a departed node out (none is used): its rank, if it
still runs, reaches the head's master port, where the /health wait's identity check names it."""

from __future__ import annotations

from typing import Any

from pyinfra import host, logger

from halo_cluster.node.nodefiles import cached
from halo_cluster.roles.serve.facts import DepartedServices
from halo_cluster.roles.serve.files import RAY, VLLM, paths
from halo_cluster.roles.serve.services import leave_cluster


def read(data: Any) -> tuple[type, dict[str, Any]] | None:
    """The head's probe of the departed nodes, when there are any."""
    if data.halo_role != "head" or not data.halo_container_left:
        return None
    addresses = tuple(sorted(data.halo_container_left.values()))
    return DepartedServices, {"user": data.halo_cluster_user, "addresses": addresses}


def leave(user: str) -> None:
    """On the head: every departed node that still has our services is taken out; one that
    cannot be reached is said (it stays in `left`: the next deploy asks again)."""
    probe = read(host.data)
    if probe is None:
        return
    fact, kwargs = probe
    found = cached(host, fact, **kwargs)
    for name, address in sorted(host.data.halo_container_left.items()):
        state = found.get(address, "unreachable")
        said = f"{name} ({address}) left the cluster"
        if state == "present":
            leave_cluster(
                name=f"Take {name} ({address}) out of the cluster",
                user=user,
                node=name,
                address=address,
                services=[VLLM, RAY],
                paths=list(paths().values()),
                token_rotated=host.data.halo_serve_ray_token_owned and not _native(),
                line=f"{said}: {_stopped()}",
            )
        elif state == "unreachable":
            logger.warning(
                f"{host.print_prefix}{said} but cannot be reached: its services may still run; "
                f"{_keeps_out()}"
            )
        else:
            logger.info(f"{host.print_prefix}{said}: none of its services remain")


def _native() -> bool:
    return host.data.halo_serve_launcher == "native"


def _stopped() -> str:
    if _native():  # no Ray token in use: none rotated
        return "its vLLM rank stopped and removed"
    return f"its Ray and vLLM services stopped and removed; {_token()}"


def _token() -> str:
    if host.data.halo_serve_ray_token_owned:
        return "Ray token rotated"
    return f"{_given()} was not rotated (yours): write a new token into it"


def _keeps_out() -> str:
    if _native():
        return (
            "if its vLLM rank still runs, the head's master port shows it (the /health wait "
            "names it): stop its halo-vllm"
        )
    if host.data.halo_serve_ray_token_owned:
        return "the rotated Ray token keeps it out"
    return f"{_given()} is yours: write a new token into it to keep it out"


def _given() -> str:
    return f"the Ray token in {host.data.halo_serve_ray_token_file}"
