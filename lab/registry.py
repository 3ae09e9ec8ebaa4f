"""The lab's image registry: seeded once per storage with the stand-in vLLM image (lab/image.py)
under the upstream image's name, as `latest` and as the immutable tag cluster.example.yml names,
and with the lab's Prometheus image (lab/promimage.py). Each step runs on the first node (`node`:
the ssh argv that reaches it) and keeps a marker in the shared storage, so a later lab skips it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from lab import node, promimage
from lab.places import PROJECT
from lab.sh import LabError

REPOSITORY = "127.0.0.1:5000/kyuz0/vllm-therock-gfx1151"
SEED_NAME = f"{REPOSITORY}:latest"
UPSTREAM = "docker.io/kyuz0/vllm-therock-gfx1151"  # the lab's registries.conf maps it here

SEED = f"""
set -eu
podman import --quiet --change 'CMD ["/bin/bash"]' \\
    /srv/halo-lab-image/image.tar {SEED_NAME} >/dev/null
podman push --quiet --tls-verify=false {SEED_NAME} >/dev/null
podman rmi --force {SEED_NAME} >/dev/null
"""

# the registry's own record of what `latest` names (distribution's filesystem layout)
LATEST_LINK = (
    "docker/registry/v2/repositories/kyuz0/vllm-therock-gfx1151/_manifests/tags/latest/current/link"
)


def run(node_argv: list[str], script: str, what: str, *args: str) -> str:
    result = subprocess.run(
        [*node_argv, "sh", "-s", "--", *args], input=script, capture_output=True, text=True
    )
    if result.returncode != 0:
        raise LabError(f"{what} failed: {result.stderr.strip()}")
    return result.stdout


def seed(node_argv: list[str], shared: node.Shared) -> None:
    """Push the seed image into the shared registry storage once; the marker keeps the digest
    `latest` then named, which every new lab starts from."""
    marker = shared.registry / ".seeded"
    if marker.exists():
        return
    run(node_argv, SEED, "seeding the lab registry")
    marker.write_text((shared.registry / LATEST_LINK).read_text())


def example_tag() -> str:
    """The tag of the image cluster.example.yml names (what `halo-cluster init` writes)."""
    image = yaml.safe_load((PROJECT / "cluster.example.yml").read_text())["image"]
    name, _, tag = str(image).rpartition(":")
    if name != UPSTREAM:
        raise LabError(f"cluster.example.yml: image {image!r} is not {UPSTREAM}, the lab's image")
    return tag


TAG = f"""
set -eu
podman pull --quiet --tls-verify=false {SEED_NAME} >/dev/null
podman tag {SEED_NAME} {REPOSITORY}:"$1"
podman push --quiet --tls-verify=false {REPOSITORY}:"$1" >/dev/null
podman rmi --force {SEED_NAME} {REPOSITORY}:"$1" >/dev/null  # root's storage stays empty
"""


def tag_example(node_argv: list[str], shared: node.Shared) -> None:
    """The seed build under the example's immutable tag too (after reset_latest, `latest` is the
    seed), once per storage and tag: a user's config from `init` pulls what the lab serves."""
    tag = example_tag()
    marker = shared.registry / f".seeded-tag-{tag}"
    if marker.exists():
        return
    run(node_argv, TAG, f"tagging the seed image as {tag}", tag)
    marker.touch()


def seed_prometheus(node_argv: list[str], shared: node.Shared, tar: Path) -> None:
    """Publish the lab's Prometheus image once per build of it, under the real image's name
    and tag."""
    marker = shared.registry / f".seeded-{tar.stem}"
    if marker.exists():
        return
    script = promimage.seed_script(f"/srv/halo-lab-image/{tar.name}")
    run(node_argv, script, "seeding the lab registry with Prometheus")
    marker.touch()


def reset_latest(shared: node.Shared) -> None:
    """A new lab is a new cluster on the seed build: `latest` back where the seed put it (a build
    an earlier lab published stays in the storage, under its digest, but no longer tagged)."""
    marker, link = shared.registry / ".seeded", shared.registry / LATEST_LINK
    seeded = marker.read_text().strip() if marker.exists() else ""
    if not seeded.startswith("sha256:"):
        marker.unlink(missing_ok=True)  # seeded before the digest was kept: seed again
    elif link.exists():
        link.write_text(seeded)  # in place: the file stays the registry user's
