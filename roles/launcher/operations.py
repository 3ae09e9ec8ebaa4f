"""The launcher role's operations: the cluster user's key pair, and the head's key authorized on
the workers."""

from __future__ import annotations

import shlex

from pyinfra.api import FunctionCommand, OperationError, operation

from halo_cluster.node.facts import as_user
from halo_cluster.node.operations import RESTORE_SELINUX_LABEL


@operation(is_idempotent=False)
def user_ssh_key(user: str):
    """
    Give a user an ed25519 key pair, made on the node: the private key never leaves it.

    + user: the user

    **Example:**

    .. code:: python

        user_ssh_key(name="SSH key of the cluster user", user="vllm")
    """
    keygen = "ssh-keygen -q -t ed25519 -N '' -C halo-cluster -f ~/.ssh/id_ed25519"
    script = f"test -f ~/.ssh/id_ed25519 || {{ mkdir -p -m 700 ~/.ssh && {keygen}; }}"
    yield as_user(user, f"sh -c {shlex.quote(script)}")


@operation(is_idempotent=False)
def authorize_key(user: str, key: str | None, from_host: str):
    """
    Add a public key to a user's authorized_keys, keeping every other line.

    + user: the user whose authorized_keys get the key
    + key: the public key line; None reads ``~USER/.ssh/id_ed25519.pub`` from ``from_host`` when
      the operation runs (the key is made earlier in the same run)
    + from_host: inventory name of the host the key belongs to

    **Example:**

    .. code:: python

        authorize_key(name="Head may log in", user="vllm", key=None, from_host="halo1")
    """
    if key:
        yield _authorize_script(user, key)
    else:
        yield FunctionCommand(_authorize_from, (user, from_host), {})


def _authorize_from(state, host, user: str, from_host: str) -> bool:
    source = next(h for h in state.inventory if h.data.get("halo_node") == from_host)
    read, output = source.run_shell_command(f"cat ~{user}/.ssh/id_ed25519.pub")
    if not read or not output.stdout.strip():
        raise OperationError(f"cannot read {from_host}'s public key of {user}")
    written, _ = host.run_shell_command(_authorize_script(user, output.stdout.strip()))
    return written


def _authorize_script(user: str, key: str) -> str:
    keys = f"~{user}/.ssh/authorized_keys"
    q = shlex.quote
    return (
        f"install -d -m 700 -o {q(user)} -g $(id -gn {q(user)}) ~{user}/.ssh && "
        f"{{ grep -qxF {q(key)} {keys} 2>/dev/null || echo {q(key)} >> {keys}; }} && "
        f"chown {q(user)}: {keys} && chmod 600 {keys} && "
        f"{RESTORE_SELINUX_LABEL.format(path=f'~{user}/.ssh')}"
    )
