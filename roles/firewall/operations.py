"""The firewall role's operations on firewalld: our service in a zone, and a reload."""

from __future__ import annotations

import shlex

from pyinfra.api import operation


@operation(is_idempotent=False)
def zone_service(zone: str, service: str, present: bool = True):
    """
    Add a service to a firewalld zone, or remove it, now and permanently.

    + zone: the zone, as firewalld names it
    + service: a service firewalld knows (its own or one in /etc/firewalld/services)
    + present: add (True) or remove (False)

    **Example:**

    .. code:: python

        zone_service(name="Open vLLM in public", zone="public", service="halo-vllm")
    """
    verb = "add" if present else "remove"
    change = f"--zone={shlex.quote(zone)} --{verb}-service={shlex.quote(service)}"
    yield f"firewall-cmd --permanent {change} && firewall-cmd {change}"


@operation(is_idempotent=False)
def reload_firewall():
    """
    Make firewalld read its permanent configuration again (a new or changed service file).

    Runtime-only changes made by hand are lost; interfaces NetworkManager placed keep their zone.

    **Example:**

    .. code:: python

        reload_firewall(name="Reload firewalld")
    """
    yield "firewall-cmd --reload"
