"""What the serve role reads from a node besides files: its services' states, what the user's
systemd manager runs with, and vLLM's answer (pyinfra facts, declared in the role's
`reads(data)`: read with the node's other facts)."""

from __future__ import annotations

import json
import shlex
from typing import Literal, NotRequired, TypedDict

from pyinfra.api import FactBase

from halo_cluster.decide.rdmatools import RdmaLink, parse_rdma_link
from halo_cluster.node.facts import as_user
from halo_cluster.node.memory import model_dir
from halo_cluster.roles.serve.files import UNITS
from halo_cluster.roles.serve.usermanager import MEMLOCK_ROW, hard_memlock

Departure = Literal["present", "absent", "unreachable"]
SSH_UNREACHABLE = 255  # ssh's own exit status: no connection, or a host key it does not pin


def over_data_link(user: str, address: str, command: str) -> str:
    """`command` run on a node over the data link, as the head's cluster user logs in there:
    its key, the workers' host keys the launcher role pinned (an unknown key is refused, not
    asked), never a password; 5 s for a node that is gone."""
    return (
        "ssh -n -o BatchMode=yes -o ConnectTimeout=5 -o StrictHostKeyChecking=yes "
        f"{shlex.quote(f'{user}@{address}')} {shlex.quote(command)}"
    )


class DepartedServices(FactBase[dict[str, Departure]]):
    """Whether each node that left the cluster (the lock's `left`) still has our services, asked
    from the head as the cluster user: {data address: present, absent or unreachable}. An
    address without an answer (the head has no cluster user yet) counts as unreachable."""

    @staticmethod
    def default() -> dict[str, Departure]:
        return {}

    def command(self, user: str, addresses: tuple[str, ...]) -> str:
        probe = f"ls ~/{UNITS}/halo-*.container"
        lines = [f"id -u {shlex.quote(user)} >/dev/null 2>&1 || exit 0"]
        for address in addresses:
            ssh = as_user(user, over_data_link(user, address, probe))
            lines.append(f"{ssh} >/dev/null 2>&1; echo {shlex.quote(address)} $?")
        return "; ".join(lines)

    def process(self, output: list[str]) -> dict[str, Departure]:
        found: dict[str, Departure] = {}
        for line in output:
            address, _, status = line.strip().rpartition(" ")
            if address and status.isdigit():
                found[address] = departure(int(status))
        return found


def departure(status: int) -> Departure:
    """The probe's exit status: ssh's 255, else `ls`'s (2: no quadlet of ours matched)."""
    if status == SSH_UNREACHABLE:
        return "unreachable"
    return "present" if status == 0 else "absent"


class UserUnits(FactBase[dict[str, str]]):
    """ActiveState of some of a user's systemd units: {unit: state}; {} when the user's manager
    is not running (a new user, before linger)."""

    @staticmethod
    def default() -> dict[str, str]:
        return {}

    def command(self, user: str, units: tuple[str, ...]) -> str:
        names = " ".join(shlex.quote(f"{unit}.service") for unit in units)
        show = f"systemctl --user show --property=Id,ActiveState {names}"
        return f"{as_user(user, show)} 2>/dev/null || true"

    def process(self, output: list[str]) -> dict[str, str]:
        states, unit = {}, None
        for line in output:
            key, _, value = line.partition("=")
            if key == "Id":
                unit = value.removesuffix(".service")
            elif key == "ActiveState" and unit:
                states[unit] = value
        return states


class ManagerLimits(TypedDict):
    """`UserManager`'s reading; a key is absent when it could not be read."""

    gids: NotRequired[list[int]]  # the running manager's groups
    memlock: NotRequired[str]  # its hard memlock limit: "unlimited" or bytes
    pid1_memlock: NotRequired[str]  # PID 1's (systemd's own 64 MiB on a real node)
    pid1_caps: NotRequired[int]  # PID 1's effective capabilities (CapEff)
    default_memlock: NotRequired[str]  # DefaultLimitMEMLOCK: what a restarted manager gets


class UserManager(FactBase[ManagerLimits]):
    """What the user's systemd manager (user@UID.service, parent of its services) runs with,
    when it runs, and PID 1's hard memlock limit, capabilities and DefaultLimitMEMLOCK (what a
    restarted manager would get) in any case. The limits rows as the kernel prints them, read
    with usermanager.hard_memlock."""

    @staticmethod
    def default() -> ManagerLimits:
        return ManagerLimits()

    def command(self, user: str) -> str:
        row = f"grep '^{MEMLOCK_ROW}'"
        return (
            f'echo "pid1_memlock=$({row} /proc/1/limits)"; '
            "echo \"pid1_caps=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/1/status)\"; "
            'echo "default_memlock=$(systemctl show -p DefaultLimitMEMLOCK --value)"; '
            f"uid=$(id -u {shlex.quote(user)} 2>/dev/null) || exit 0; "
            'pid=$(systemctl show -p MainPID --value "user@$uid.service"); '
            '[ "${pid:-0}" -gt 0 ] || exit 0; '
            'echo "gids=$(sed -n \'s/^Groups:[[:space:]]*//p\' "/proc/$pid/status")"; '
            f'echo "memlock=$({row} "/proc/$pid/limits")"'
        )

    def process(self, output: list[str]) -> ManagerLimits:
        found = ManagerLimits()
        for line in output:
            key, _, value = line.partition("=")
            if key == "gids":
                found["gids"] = [int(g) for g in value.split()]
            elif key in ("memlock", "pid1_memlock") and (limit := hard_memlock(value)):
                found[key] = limit
            elif key == "pid1_caps" and value.strip():
                found["pid1_caps"] = int(value, 16)
            elif key == "default_memlock":
                found[key] = value.strip()
        return found


class ModelFolder(TypedDict):
    dir: str | None  # the folder (None when absent)
    files: dict[str, int]  # path below it -> apparent size
    # path -> size from huggingface_hub's tree listing of that revision (`trees/REV.json`,
    # written before the first file is fetched; None without one)
    expected: dict[str, int] | None


class ModelFiles(FactBase[ModelFolder]):
    """The model's files on this node where vLLM will look for them. A Hugging Face id is read
    through `refs/main` in the user's cache (a snapshot's links followed: a link to a missing
    blob is not a file), a path as it is."""

    @staticmethod
    def default() -> ModelFolder:
        return ModelFolder(dir=None, files={}, expected=None)

    def command(self, user: str, model: str) -> str:
        tree = (
            't="${d%/snapshots/*}/trees/${d##*/}.json"; '
            '[ ! -f "$t" ] || { echo tree-begin; cat "$t"; echo; echo tree-end; }; '
        )
        return (
            f"d={model_dir(user, model)}; "
            'if [ -d "$d" ] && [ "${d%/snapshots/}" = "$d" ]; then echo "dir $d"; '
            "find -L \"$d\" -type f -printf '%s %P\\n'; "
            f"{'' if model.startswith('/') else tree}fi; true"
        )

    def process(self, output: list[str]) -> ModelFolder:
        found = self.default()
        tree: list[str] | None = None
        for line in output:
            if tree is not None:
                if line == "tree-end":
                    found["expected"] = tree_files("\n".join(tree))
                    tree = None
                else:
                    tree.append(line)
            elif line == "tree-begin":
                tree = []
            elif line.startswith("dir "):
                found["dir"] = line[4:]
            else:
                size, _, path = line.partition(" ")
                if size.isdigit() and path:
                    found["files"][path] = int(size)
        return found


def tree_files(text: str) -> dict[str, int] | None:
    """{path: size} of a huggingface_hub tree listing (`_tree_cache.py`, format_version 1); None
    when it cannot be read, as huggingface_hub then ignores it."""
    try:
        data = json.loads(text)
        if data.get("format_version") != 1:
            return None
        return {path: int(entry["size"]) for path, entry in data["files"].items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def complete(found: ModelFolder) -> bool:
    """Whether a ModelFiles reading holds the whole snapshot: some files, and every file of its
    tree listing at its size (without a listing, what is there: huggingface_hub's own rule)."""
    expected = found["expected"] or {}
    return bool(found["files"]) and all(found["files"].get(p) == n for p, n in expected.items())


class HttpStatus(FactBase[int]):
    """The HTTP status a URL answers with from this node (0: no answer within 5 s)."""

    @staticmethod
    def default() -> int:
        return 0

    def command(self, url: str) -> str:
        return f"curl -s -o /dev/null -m 5 -w '%{{http_code}}' {shlex.quote(url)} || true"

    def process(self, output: list[str]) -> int:
        text = "".join(output).strip()
        return int(text) if text.isdigit() else 0


class RdmaLinks(FactBase[list[RdmaLink]]):
    """`rdma link`: every RDMA port's device, state and netdev (`rdmatools.parse_rdma_link`);
    [] when there is none, or no `rdma` tool (iproute) to ask."""

    # `rdma link` fails outright (NETLINK_RDMA) on a kernel without its RDMA stack
    unreadable_fix = (
        "`rdma link` fails: the node's RDMA stack is not loaded (modprobe irdma; the rdma role "
        "loads it at boot), or set serve.transport: sockets"
    )

    @staticmethod
    def default() -> list[RdmaLink]:
        return []

    def requires_command(self) -> str:
        return "rdma"

    def command(self) -> str:
        return "rdma link show"

    def process(self, output: list[str]) -> list[RdmaLink]:
        return parse_rdma_link("\n".join(output))


class ModelConfigReading(TypedDict):
    source: str | None  # the snapshot folder, or the hub's URL (None: neither read)
    config: dict | None  # config.json
    total_size: int | None  # the safetensors index's metadata.total_size (the cache's)
    sizes: list[int] | None  # the hub's file list: each top-level *.safetensors' size
    error: str | None  # why the hub did not answer (curl's exit status)


class ModelConfig(FactBase[ModelConfigReading]):
    """The model's config.json and its weights' size before any download (the serve role's
    fit.py): from the cluster user's cache when its snapshot has config.json (with the index's
    total_size, `grep`ped: an index lists every tensor), else, when `online`, from the hub's
    HTTP API as huggingface_hub calls it, `GET ENDPOINT/MODEL/resolve/main/config.json` and the
    file list `GET ENDPOINT/api/models/MODEL/tree/main` (the top level: what vLLM loads), with
    the node's HF token when it has one (on curl's stdin, never an argument)."""

    @staticmethod
    def default() -> ModelConfigReading:
        return ModelConfigReading(source=None, config=None, total_size=None, sizes=None, error=None)

    def command(self, user: str, model: str, endpoint: str, token: str, online: bool) -> str:
        """`token`: the node's token file as a shell word ("" none); `online`: may ask the hub."""
        cache = (
            f"d={model_dir(user, model)}; "
            'if [ -f "$d/config.json" ]; then echo "source $d"; echo config-begin; '
            'cat "$d/config.json"; echo; echo config-end; i="$d/model.safetensors.index.json"; '
            '[ ! -f "$i" ] || grep -o \'"total_size"[[:space:]]*:[[:space:]]*[0-9]*\' "$i" '
            "| head -n 1 | sed 's/.*[^0-9]/total_size /'; "
        )
        if not online or model.startswith("/"):
            return cache + "fi; true"
        q = shlex.quote
        base = endpoint.rstrip("/")
        curl = 'curl -fsSL --connect-timeout 10 -m 30 "$1"'
        get = f"get() {{ {curl}; }}; "
        if token:  # the header on stdin; printf is the shell's own: the token is in no argv
            get = (
                f"get() {{ if [ -r {token} ]; then printf 'Authorization: Bearer %s\\n' "
                f'"$(cat {token})" | {curl} -H @-; else {curl}; fi; }}; '
            )
        hub = (
            f"echo source {q(f'{base}/{model}')}; echo config-begin; "
            f"get {q(f'{base}/{model}/resolve/main/config.json')} "
            '|| echo "error config.json: curl exit status $?"; echo; echo config-end; '
            f"echo tree-begin; get {q(f'{base}/api/models/{model}/tree/main')} "
            '|| echo "error file list: curl exit status $?"; echo; echo tree-end; '
        )
        return f"{get}{cache}else {hub}fi; true"

    def process(self, output: list[str]) -> ModelConfigReading:
        found = self.default()
        part: str | None = None
        lines: dict[str, list[str]] = {"config": [], "tree": []}
        for line in output:
            if part and line == f"{part}-end":
                part = None
            elif part and line.startswith("error "):
                found["error"] = found["error"] or line.removeprefix("error ")
            elif part:
                lines[part].append(line)
            elif line in ("config-begin", "tree-begin"):
                part = line.removesuffix("-begin")
            elif line.startswith("source "):
                found["source"] = line.removeprefix("source ")
            elif line.startswith("total_size ") and line[11:].isdigit():
                found["total_size"] = int(line[11:])
        found["config"] = _json_object("\n".join(lines["config"]))
        listing = _json_list("\n".join(lines["tree"]))
        if listing is not None:
            found["sizes"] = [
                int(f["size"])
                for f in listing
                if isinstance(f, dict)
                and f.get("type") == "file"
                and str(f.get("path", "")).endswith(".safetensors")
                and "/" not in str(f["path"])
                and isinstance(f.get("size"), int)
            ]
        return found


def _json_object(text: str) -> dict | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _json_list(text: str) -> list | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, list) else None
