"""The network role's operation on NetworkManager: bring the data link's connection up."""

from __future__ import annotations

import shlex

from pyinfra.api import operation


@operation(is_idempotent=False)
def activate_connection(connection: str):
    """
    Load changed NetworkManager keyfiles and bring one connection up.

    + connection: the connection id

    **Example:**

    .. code:: python

        activate_connection(name="Activate the data link", connection="halo-data")
    """
    yield f"nmcli connection reload && nmcli connection up id {shlex.quote(connection)}"
