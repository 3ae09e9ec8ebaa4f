"""The roles run in their declared order on every node, whatever each node plans."""

from __future__ import annotations

from halo_cluster.node import toolbox
from halo_cluster.roles import all_roles
from tests.plan.nodes import IMAGE_ID, containers, node, plan_pair


def test_every_role_has_its_own_place() -> None:
    orders = [role.ORDER for role in all_roles()]
    assert len(set(orders)) == len(orders), orders


def test_head_without_the_image_and_worker_with_it_reboot_in_order() -> None:
    """Nodes that plan different operations still agree on the order: the head pulls the image
    the worker has, then the worker reboots (one at a time) before the head."""
    present = node(user_files=containers(IMAGE_ID, IMAGE_ID, toolbox.options(True)))
    result = plan_pair("reboot: if-needed\n", head=node(), worker=present)
    head, worker = result.names("halo1"), result.names("halo2")
    assert any(n.startswith("Image and toolbox | Pull") for n in head)
    assert not any(n.startswith("Image and toolbox | Pull") for n in worker)
    assert worker[-2:] == [
        "Reboot | Reboot worker for kernel arguments",
        "Reboot | Confirm the kernel arguments are active",
    ]
    assert head[-2:] == [
        "Reboot | Reboot head for kernel arguments",
        "Reboot | Confirm the kernel arguments are active",
    ]
    in_order = [role.apply.deploy_name for role in all_roles()]
    roles = [name.split(" | ")[0] for name in head]
    assert roles == sorted(roles, key=in_order.index)
