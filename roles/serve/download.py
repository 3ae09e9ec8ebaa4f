"""The model's download into the cluster user's Hugging Face cache, with the image's own `hf`,
its progress read from the cache's blobs against the hub's file sizes (docs/roles/serve.md)."""

from __future__ import annotations

import re
import shlex

from pyinfra.api import FunctionCommand, operation

from halo_cluster.decide.transfer import Expected
from halo_cluster.node.facts import as_user
from halo_cluster.node.memory import hub_folder
from halo_cluster.node.operations import run_saying_what
from halo_cluster.node.progress import Measure
from halo_cluster.roles.serve.files import BY_NAME

# the repository's files as the hub lists them, `BLOB SIZE` a line: the name the cache gives a
# file's blob (an LFS file's sha256, another's git blob id, as huggingface_hub names them)
LIST_FILES = (
    "import sys\n"
    "from huggingface_hub import HfApi\n"
    "for f in HfApi().list_repo_tree(sys.argv[1], recursive=True):\n"
    "    if hasattr(f, 'blob_id'): print(f.lfs.sha256 if f.lfs else f.blob_id, f.size)\n"
)
# the Python that runs the image's `hf` (its shebang; `/usr/bin/env python3` as well)
HF_PYTHON = "$(sed -n '1s/^#!//p' \"$(command -v hf)\")"
BLOB_LINE = re.compile(r"([0-9a-f]{40}|[0-9a-f]{64}) (\d+)")


@operation(is_idempotent=False)
def download_model(user: str, image: str, model: str, token: bool, go_online: bool = False):
    """
    Fetch a model's weights into the user's Hugging Face cache with the image's own CLI
    (``hf download``, huggingface_hub 1.x), saying every 15 s the bytes fetched of the model's
    files, the rate and the time left (the blobs in the cache, partial ones included, against
    the hub's list of the repository's files), and a download that fetched nothing for 120 s.
    It reads this node's serve.env (HF_HOME, HF_TOKEN_PATH and the user's ``serve.env``, e.g.
    HF_HUB_OFFLINE); the token, when there is one, is the node's own 0600 file mounted
    read-only: never an argument, never the head's secrets.

    + user: the cluster user
    + image: the serving image
    + model: a Hugging Face id (a path on the node is left as it is)
    + token: whether the node has an HF token file
    + go_online: serve.env keeps the services offline (HF_HUB_OFFLINE=1, set by the deploy):
      this download goes online all the same

    **Example:**

    .. code:: python

        download_model(name="Download the model", user="vllm", image="docker.io/kyuz0/...",
                       model="Qwen/Qwen3-14B", token=False)
    """
    if model.startswith("/"):
        return
    q = shlex.quote
    download = _in_image(user, image, token, go_online, f"hf download {q(model)} >/dev/null")
    run_python = q(f'exec {HF_PYTHON} -c "$0" "$1"')
    listing = f"sh -c {run_python} {q(LIST_FILES)} {q(model)}"
    blobs = f"~{user}/{hub_folder(model)}/blobs"
    measure = Measure(
        expected=_in_image(user, image, token, go_online, listing),
        expected_from=repository_files,
        on_disk=f"find {blobs} -maxdepth 1 -type f -printf '%f %s\\n' 2>/dev/null",
    )
    what = f"the download of {model}"
    yield FunctionCommand(run_saying_what, (download, what, measure), {})


def _in_image(user: str, image: str, token: bool, go_online: bool, command: str) -> str:
    """`command` in the image as the user, with the node's serve.env, cache and token."""
    mounts = ['-v "$HOME/.cache/huggingface:/root/.cache/huggingface"']
    if token:
        mounts.append(f'-v "$HOME/{BY_NAME["hf_token"].path}:/etc/halo-cluster/hf-token:ro"')
    online = "env HF_HUB_OFFLINE=0 " if go_online else ""
    # podman does not create a missing bind source (a fresh node has no cache yet); the home's
    # SELinux labels stay, as in the quadlets (SecurityLabelDisable=true)
    run = (
        'mkdir -p "$HOME/.cache/huggingface" && podman run --rm --network=host '
        f'--security-opt label=disable --env-file="$HOME/{BY_NAME["env"].path}" {" ".join(mounts)} '
        f"{shlex.quote(image)} {online}{command}"
    )
    return as_user(user, f"sh -c {shlex.quote(run)}")


def repository_files(output: str) -> Expected:
    """LIST_FILES's lines: the files' total and their blobs' names (unknown when the hub did not
    answer, e.g. offline: then the bytes the cache gained since the download began)."""
    found = dict(m.groups() for m in map(BLOB_LINE.fullmatch, output.split("\n")) if m)
    if not found:
        return Expected(None)
    return Expected(sum(map(int, found.values())), frozenset(found))
