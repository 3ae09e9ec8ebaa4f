"""The gfx1151 vLLM image and its toolbox, rootless for the cluster user, as upstream does it."""

from pyinfra import host
from pyinfra.api import deploy

from halo_cluster.node import toolbox as toolbox_files
from halo_cluster.node.context import NodeContext
from halo_cluster.node.nodefiles import STORAGE, node_files
from halo_cluster.roles.container.operations import pull_image, toolbox_container

ORDER = 60
PACKAGES = ("podman", "toolbox")


def paths(data) -> tuple[str, ...]:
    home = f"~{data.halo_cluster_user}"
    return (
        f"{home}/{toolbox_files.state_file(data.halo_toolbox)}",
        f"{home}/{STORAGE}/*-images/images.json",
        f"{home}/{STORAGE}/*-containers/containers.json",
    )


@deploy("Image and toolbox")
def apply(node: NodeContext) -> None:
    user, image, name = host.data.halo_cluster_user, host.data.halo_image, host.data.halo_toolbox
    update = host.data.halo_image_update
    files = node_files(host)
    image_id = files.image_id(user, image)
    if image_id is None or update:
        pull_image(name=f"Pull {image} as {user}", user=user, image=image)

    options = toolbox_files.options(node.has_infiniband)
    current = (
        image_id is not None
        and files.container_image(user, name) == image_id
        and (files.user_file(user, toolbox_files.state_file(name)) or "").strip()
        == toolbox_files.record(image_id, options)
    )
    if update or not current:
        toolbox_container(
            name=f"Toolbox {name} from {image}",
            user=user,
            toolbox=name,
            image=image,
            options=options,
        )
