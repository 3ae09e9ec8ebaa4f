"""Operations on the cluster user's systemd services: start, restart, remove, wait for serving."""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable

from pyinfra import logger
from pyinfra.api import FunctionCommand, operation

from halo_cluster.config.lock import history_line
from halo_cluster.config.serving import api_key_read
from halo_cluster.node import vllmworld as world
from halo_cluster.node.facts import as_user
from halo_cluster.node.image import history_append
from halo_cluster.node.memory import hub_folder
from halo_cluster.node.operations import run_saying_what
from halo_cluster.node.progress import waiting
from halo_cluster.roles.serve import warmwait
from halo_cluster.roles.serve.facts import over_data_link

POLL_SECONDS = 1  # a curl on the head: the deploy sees vLLM serving within a second
NOT_OURS_SECONDS = 5  # after a 200 from a vLLM that is not the configured cluster's yet
NOT_200 = "vLLM's /health does not answer 200"


@operation(is_idempotent=False)
def user_systemctl(
    user: str,
    args: list[str],
    retried_by_systemd: bool = False,
    required_image: tuple[str, str] | None = None,
):
    """
    Run ``systemctl --user`` as the user, in its lingering systemd session.

    + user: the cluster user
    + args: systemctl arguments
    + retried_by_systemd: a failed start job is not an error here: the unit's ``Restart=`` tries
      again, and what follows (the wait for /health) judges the outcome
    + required_image: (image, line): run nothing and fail with that one line when the image is
      not in the user's storage (a service never starts on another build than the cluster's)

    **Example:**

    .. code:: python

        user_systemctl(name="Restart Ray", user="vllm", args=["restart", "--no-block", "halo-ray"])
    """
    command = as_user(user, "systemctl --user " + " ".join(shlex.quote(a) for a in args))
    if retried_by_systemd:
        command += " || echo 'the start failed: systemd tries again (Restart=always)'"
    if required_image:
        yield image_present(user, required_image)
    yield command


def image_present(user: str, required_image: tuple[str, str]) -> str:
    """A command that fails with the line when the image is not in the user's storage."""
    image, line = required_image
    present = as_user(user, f"podman image exists {shlex.quote(image)}")
    return f"{present} || {{ echo {shlex.quote(line)} >&2; exit 1; }}"


@operation(is_idempotent=False)
def stop_user_services(
    user: str, services: list[str], required_image: tuple[str, str] | None = None
):
    """
    Stop the user's services now, for what follows; nothing when ``services`` is empty. Called
    on every node with its own list: pyinfra merges the nodes' own sequences of operations, and
    two operations no node plans both have no order between them (the plan tests saw a worker's
    stop run before the head's one written above it).

    + user: the cluster user
    + services: service names without ``.service``, in the order to stop them
    + required_image: (image, line): stop nothing and fail with the line when the image the
      services restart on is not in the user's storage (the old ones keep running)

    **Example:**

    .. code:: python

        stop_user_services(name="Stop vLLM", user="vllm", services=["halo-vllm"])
    """
    if not services:
        return
    if required_image:
        yield image_present(user, required_image)
    yield as_user(user, "systemctl --user stop " + " ".join(shlex.quote(s) for s in services))


@operation(is_idempotent=False)
def remove_user_services(user: str, services: list[str], paths: list[str]):
    """
    Stop services, then remove their files and reload: a quadlet removed before its service
    stopped leaves the container behind.

    + user: the cluster user
    + services: service names without ``.service``
    + paths: files to remove (unit files, scripts, environment files)

    **Example:**

    .. code:: python

        remove_user_services(name="Remove vLLM", user="vllm", services=["halo-vllm"],
                             paths=["/home/vllm/.config/containers/systemd/halo-vllm.container"])
    """
    quoted = [shlex.quote(p) for p in paths]
    yield from removal(services, quoted, lambda command: as_user(user, command))


def removal(services: list[str], paths: list[str], run: Callable[[str], str]) -> list[str]:
    """The commands that stop `services` and remove their files (`paths`, quoted for a shell),
    each systemctl and podman command run as the user by `run`."""
    units = " ".join(shlex.quote(f"{s}.service") for s in services)
    commands = [f"{run(f'systemctl --user stop {units}')} || true"] if services else []
    commands.append("rm -f " + " ".join(paths))
    # a manager that is not running (a former cluster user's, not lingering) has nothing loaded
    commands.append(f"{run('systemctl --user daemon-reload')} || true")
    if services:
        # a service that ended failed (as an old head's vLLM did on the lab when stopped) stays
        # listed as failed once its unit is gone: forgotten, as a removed service should be
        commands.append(f"{run(f'systemctl --user reset-failed {units}')} 2>/dev/null || true")
        names = " ".join(shlex.quote(s) for s in services)
        commands.append(f"{run(f'podman rm --force --ignore {names}')} >/dev/null")
    return commands


@operation(is_idempotent=False)
def leave_cluster(
    user: str,
    node: str,
    address: str,
    services: list[str],
    paths: list[str],
    token_rotated: bool,
    line: str,
):
    """
    Take a node that left cluster.yml out of the cluster, from the head over the data link as
    the cluster user (the launcher role's key and pinned host keys): stop its services, remove
    their files (without its quadlet no unit is generated again, at boot neither), reload, remove
    the containers; then a ``member-left`` line in the head's history, and ``line`` said.

    + user: the cluster user, on the head and on the node
    + node: the node's name (the history's)
    + address: its data address
    + services: service names without ``.service``
    + paths: the services' files, relative to the user's home on the node
    + token_rotated: the Ray token was rotated when it left (the history's)
    + line: what was done on it and about the Ray token, said once it is done

    **Example:**

    .. code:: python

        leave_cluster(name="Take node3 out", user="vllm", node="node3",
                      address="192.168.100.3", services=["halo-vllm", "halo-ray"],
                      paths=[".config/containers/systemd/halo-ray.container"],
                      token_rotated=True, line="node3 (192.168.100.3) left the cluster: ...")
    """
    files = [f'"$HOME"/{shlex.quote(p)}' for p in paths]
    remote = " && ".join(removal(services, files, lambda command: command))
    yield f"{as_user(user, over_data_link(user, address, remote))} >/dev/null"
    event = history_line(
        "member-left", node=node, address=address, stopped=True, token_rotated=token_rotated
    )
    yield history_append(user, event)
    yield FunctionCommand(_say, (line,), {})


def _say(state, host, line: str) -> bool:
    logger.info(f"{host.print_prefix}{line}")
    return True


def copy_command(user: str, model: str, address: str) -> str:
    """The cluster user's shell command that copies `model`'s snapshot to `address` (copy_model;
    bench/model_copy.py times the same command)."""
    repo = hub_folder(model)
    target = shlex.quote(f"{user}@{address}:{repo}/")
    remote = f"mkdir -p {shlex.quote(repo + '/refs')} && rsync"  # run by the worker's shell
    rsync = f"rsync -a -e 'ssh -o BatchMode=yes' --rsync-path={shlex.quote(remote)}"
    # each step checked (no pipefail in dash): a failed find or readlink stops the copy before
    # refs/main is sent; a blob outside the cache's own folder is sent by its absolute path
    listing = (
        'rev=$(cat refs/main) && root=$(pwd -P) && links=$(find "snapshots/$rev" ! -type d) && '
        'blobs=$(find "snapshots/$rev" -type l -exec readlink -f {} +) && '
        """printf '%s\\n' "$links" && printf '%s\\n' "$blobs" | sed "s|^$root/||" && """
        '{ [ ! -f "trees/$rev.json" ] || echo "trees/$rev.json"; }'
    )
    script = (
        f"cd ~/{shlex.quote(repo)} && files=$({listing}) && printf '%s\\n' \"$files\" | "
        f"{rsync} -S --partial --size-only --files-from=- . {target} && "
        f"{rsync} -c refs/main {target}refs/"
    )
    return f"sh -c {shlex.quote(script)}"


@operation(is_idempotent=False)
def copy_model(user: str, model: str, address: str):
    """
    Copy a model's snapshot from this node's Hugging Face cache to another node's, as the cluster
    user over SSH (the worker admits the head's key; its host key is pinned): the blobs the
    snapshot's links name, the links, the tree listing, then `refs/main` last, so that a node
    never names a snapshot it does not hold in full. rsync keeps the cache's layout and sparse
    files (-S), resumes a broken copy (--partial) and sends no blob the node already has: a blob
    is named by its hash, so the same name and size is the same content (--size-only).

    + user: the cluster user
    + model: a Hugging Face id
    + address: the other node's data address (the copy runs over the data link)

    **Example:**

    .. code:: python

        copy_model(name="Copy the model to halo2", user="vllm", model="Qwen/Qwen3-14B",
                   address="192.168.100.2")
    """
    yield FunctionCommand(
        run_saying_what,
        (as_user(user, copy_command(user, model, address)), f"the copy of {model} to {address}"),
        {},
    )


@operation(is_idempotent=False)
def wait_for_health(
    user: str,
    url: str,
    model: str,
    timeout: int,
    services: list[str],
    nodes: list[str],
    native: tuple[int, int] | None = None,
    warmup: int = 0,
):
    """
    Wait, at most ``timeout`` seconds, until the configured cluster serves: vLLM's /health
    answers 200 on the head, from a process of ``user``, whose /v1/models names ``model`` and
    whose Ray cluster (with ``native``: whose vLLM world) is exactly ``nodes`` (not a leftover of
    an earlier config); saying what it waits for; then, at most ``warmup`` more seconds, while
    the head's warm-up runs (warmwait.py); then log ``serving MODEL at URL`` with the warm-up's
    seconds. On timeout, fail with what is still wrong, the first failing service and its last
    journal lines.

    + user: the cluster user (whose services these are)
    + url: vLLM's base URL as the head reaches it
    + model: the served model name
    + timeout: seconds
    + services: the services to report on when it does not come up, most specific first
    + nodes: the data addresses of every node: the Ray nodes the cluster must have alive, or
      with ``native`` the nodes whose ranks meet on the head's master port (node/vllmworld.py)
    + native: with ``serve.launcher: native``, (TP x PP, the master port): the world size the
      head's executor must report and the port its ranks hold
    + warmup: the warm-up's bound, seconds (0: no warm-up to wait for)

    **Example:**

    .. code:: python

        wait_for_health(name="Wait for vLLM", user="vllm", url="http://192.168.100.1:8000",
                        model="Qwen/Qwen3-14B", timeout=1800, services=["halo-vllm", "halo-ray"],
                        nodes=["192.168.100.1", "192.168.100.2"])
    """
    args = (user, url, model, timeout, services, nodes, native, warmup)
    yield FunctionCommand(_wait_for_health, args, {})


def _wait_for_health(state, host, user, url, model, timeout, services, nodes, native, warmup):
    probe = f"curl -s -o /dev/null -m 5 -w '%{{http_code}}' {shlex.quote(url + '/health')}"
    since = warmwait.clock(host)  # the warm-up lines of this start are written after it
    deadline = time.monotonic() + timeout
    wrong = NOT_200
    with waiting(host, f"vLLM's /health at {url} (up to {timeout} s)"):
        while time.monotonic() < deadline:
            _, output = host.run_shell_command(probe)
            if output.stdout.strip() == "200":
                wrong = _not_ours(host, user, url, model, nodes, native)
                if wrong is None:
                    warmed = warmwait.warmed(host, user, since, [model], warmup) if warmup else ""
                    logger.info(f"{host.print_prefix}serving {model} at {url}{warmed}")
                    return True
            # a 200 not ours yet costs a Ray client in the container (_not_ours): not each second
            time.sleep(POLL_SECONDS if wrong == NOT_200 else NOT_OURS_SECONDS)
    # logged, not raised: pyinfra prints a raised error from a callback with a traceback
    logger.error(
        f"{host.print_prefix}not serving after {timeout} s: {wrong}; {_why(host, user, services)}"
    )
    return False


# Ray's alive nodes, from inside the user's Ray container (the image's Python has Ray)
RAY_NODES = (
    "import ray; ray.init(logging_level='ERROR', log_to_driver=False); "
    "print(' '.join(sorted(n['NodeManagerAddress'] for n in ray.nodes() if n['Alive'])))"
)


def _not_ours(
    host, user: str, url: str, model: str, nodes: list[str], native: tuple[int, int] | None
) -> str | None:
    """What shows that the vLLM answering is not the configured one (None: it is)."""
    port = url.rsplit(":", 1)[1]
    _, owner = host.run_shell_command(
        f"pid=$(ss -Htlnp 'sport = :{port}' | grep -o 'pid=[0-9]*' | head -n1 | cut -d= -f2); "
        '[ -n "$pid" ] && stat -c %U "/proc/$pid"'
    )
    if owner.stdout.strip() != user:
        return f"port {port} is held by a process of {owner.stdout.strip() or 'nobody'}, not {user}"
    # the API key travels on stdin (curl -H @-), never in an argument
    models = (
        api_key_read('"$HOME"') + 'printf "Authorization: Bearer %s\n" "$key" | '
        f"curl -s -m 5 -H @- {shlex.quote(url + '/v1/models')}"
    )
    _, listed = host.run_shell_command(as_user(user, f"sh -c {shlex.quote(models)}"))
    if f'"id": "{model}"' not in listed.stdout and f'"id":"{model}"' not in listed.stdout:
        return f"/v1/models does not list {model}"
    if native:  # no Ray to ask: the head's own view of its world (vLLM listens once it is whole)
        return _not_our_world(host, user, nodes, *native)
    ray = 'exec "$(sed -n "1s/^#!//p" "$(command -v ray)")" -c ' + shlex.quote(RAY_NODES)
    _, alive = host.run_shell_command(
        as_user(user, f"podman exec halo-ray sh -c {shlex.quote(ray)} 2>/dev/null")
    )
    found = alive.stdout.strip().splitlines()[-1:] or [""]
    if found[0].split() != sorted(nodes):
        return f"Ray's alive nodes are [{found[0]}], not the configured {' '.join(sorted(nodes))}"
    return None


def _not_our_world(host, user: str, nodes: list[str], size: int, port: int) -> str | None:
    _, leader = host.run_shell_command(world.leader_command(user))
    _, peers = host.run_shell_command(world.peers_command(port))
    found, ranks = world.world_size(leader.stdout), world.store_peers(peers.stdout.splitlines())
    return world.not_the_world(found, ranks, size, nodes, port)


def _why(host, user: str, services: list[str]) -> str:
    """The first service that is not active, with its last journal lines."""
    for service in services:
        _, state = host.run_shell_command(
            as_user(user, f"systemctl --user is-active {shlex.quote(service)}.service")
        )
        if state.stdout.strip() != "active":
            break
    else:
        service = services[0]
    _, journal = host.run_shell_command(
        as_user(user, f"journalctl --user -u {shlex.quote(service)}.service -n 12 --no-pager -q")
    )
    return (
        f"{service}.service is {state.stdout.strip() or 'unknown'}; last lines:\n{journal.stdout}"
    )
