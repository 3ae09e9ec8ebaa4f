"""`halo-cluster init ADDRESS... [--ssh-key PATH]`: a commented cluster.yml in the current
folder (or the file --config or $CLUSTER_CONFIG names), from the example's defaults
(cluster.example.yml, which the wheel ships), checked by the loader before it is written."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shlex
import sys
from pathlib import Path

from halo_cluster.config import docs, state
from halo_cluster.tools.commands import exits, text

NAME = "init"
SUMMARY = "write a commented cluster.yml for your machines (the first is the head)"
OPTIONS = (
    ("--ssh-key PATH", "the private key for SSH as root (default: ~/.ssh/id_ed25519, else "
     "~/.ssh/id_rsa)"),
    ("--force", "replace an existing cluster.yml"),
)  # fmt: skip
HELP = text.page(
    "halo-cluster init ADDRESS... [--ssh-key PATH] [--force]",
    """
Writes cluster.yml in the current folder (or the file --config PATH or $CLUSTER_CONFIG names)
for the machines at ADDRESS... (their management
addresses or host names, reached over SSH as root), in order: the first is the head. Every
other setting is the example's default, with a comment saying what it is: read it, change what
differs (the interconnect, the data interface), then `halo-cluster deploy --dry`. The config is
checked as every command checks it before it is written; an existing cluster.yml is kept
unless --force.""",
    OPTIONS,
    NAME,
    "halo-cluster init 10.0.0.11 10.0.0.12 && halo-cluster deploy --dry",
)
TARGET = "cluster.yml"
EXAMPLE = "cluster.example.yml"
KEYS = ("~/.ssh/id_ed25519", "~/.ssh/id_rsa")  # the key found when none is given, in order
SUBNET = ipaddress.ip_network("192.168.100.0/30")  # the example's, widened for more nodes
KEY_LINE = re.compile(r"^(\s+key:\s*)\S+", re.MULTILINE)
SUBNET_LINE = re.compile(r"^subnet:\s*\S+\s*(#.*)?$", re.MULTILINE)
# a page the example's comments name, `docs/NAME` in the checkout: the user's copy is elsewhere
DOCS_PATH = re.compile(r"(?<![\w./-])docs(?=/)")


def found_key() -> str | None:
    """The first of KEYS that exists, as written (with `~`, so the config moves with its user)."""
    return next((key for key in KEYS if Path(key).expanduser().is_file()), None)


def subnet(count: int) -> ipaddress.IPv4Network:
    """The smallest network at SUBNET's address holding COUNT nodes."""
    prefix = SUBNET.prefixlen
    while 2 ** (32 - prefix) - 2 < count:
        prefix -= 1
    return ipaddress.ip_network(f"{SUBNET.network_address}/{prefix}")


def render(example: str, addresses: list[str], key: str) -> str:
    """cluster.yml for ADDRESSES and KEY: the example's settings and comments above `nodes:`,
    then one entry per address."""
    settings, _, _ = example.partition("\nnodes:\n")
    _, _, rest = settings.partition("\n")
    header = (
        f"# halo-cluster: {len(addresses)} Strix Halo node(s), written by `halo-cluster init` "
        "from the example's defaults."
    )
    rest = KEY_LINE.sub(lambda m: m.group(1) + json.dumps(key), rest, count=1)
    rest = DOCS_PATH.sub(str(docs.folder()), rest)
    if len(addresses) > 2:
        network = subnet(len(addresses))
        line = f"subnet: {network}    # {len(addresses)} nodes: a /30 holds two"
        rest = SUBNET_LINE.sub(line, rest, count=1)
    nodes = [
        f"  - name: halo{number}{'             # head (first node)' if number == 1 else ''}\n"
        f"    ssh: {{host: {json.dumps(address)}}}\n"
        "    data: {interface: auto}  # its address: the subnet's next free one"
        for number, address in enumerate(addresses, 1)
    ]
    return "\n".join([header, rest, "nodes:", *nodes]) + "\n"


def main(argv: list[str]) -> int:
    from halo_cluster.config.rules import file_path
    from halo_cluster.tools import options

    parser = options.parser("halo-cluster init", None, exits.ERROR)
    parser.add_argument("addresses", nargs="+", metavar="ADDRESS")
    parser.value("--ssh-key", "PATH", "the private key", rule=file_path)
    parser.flag("--force", "replace an existing cluster.yml")
    args = parser.parse_args(argv)
    given = os.environ.get("CLUSTER_CONFIG")  # the dispatcher's --config sets it
    target = Path(given).absolute() if given else Path.cwd() / TARGET
    if given and (wrong := state.unwritable(given)):
        return _refuse(f"--config {wrong}")  # a folder, or a path through a file
    if not target.parent.is_dir():
        return _refuse(f"{target.parent} does not exist: make it first")
    if target.exists() and not args.force:
        return _refuse(f"{target} exists: give --force to replace it")
    key = args.ssh_key or found_key()
    if key is None:
        return _refuse(f"no SSH key in {' or '.join(KEYS)}: give --ssh-key PATH")
    if args.ssh_key and not key.startswith("~") and target.parent != Path.cwd():
        key = os.path.abspath(key)  # given from here, read beside the config
    return _write(target, args.addresses, key)


def _write(target: Path, addresses: list[str], key: str) -> int:
    """The config written to TARGET once the loader accepts it (its problems said, else)."""
    import tempfile  # here: `halo-cluster --help` reads this module

    from halo_cluster.config.loader import ConfigError
    from halo_cluster.tools import project

    found = project.files()
    example = found.entry / EXAMPLE if found else None
    if example is None or not example.is_file():
        return _refuse(f"no {EXAMPLE} in {project.PACKAGE}: reinstall the package")
    content = render(example.read_text(), addresses, key)
    # checked under a name of its own in the same folder (relative paths resolve alike), then
    # moved over TARGET: a refused config replaces nothing
    handle, draft = tempfile.mkstemp(prefix=".cluster.", suffix=".yml", dir=target.parent)
    try:
        with os.fdopen(handle, "w") as out:
            out.write(content)
        project.load(draft)
        os.replace(draft, target)
    except ConfigError as error:
        print("\n".join(p.replace(draft, str(target)) for p in error.problems), file=sys.stderr)
        return exits.ERROR
    finally:
        if os.path.exists(draft):
            os.unlink(draft)
    head = addresses[0]
    named = f" --config {shlex.quote(str(target))}" if os.environ.get("CLUSTER_CONFIG") else ""
    print(
        f"halo-cluster init: wrote {target}: {len(addresses)} node(s), head {head}, key {key}; "
        f"next: halo-cluster deploy --dry{named}"
    )
    return exits.OK


def _refuse(line: str) -> int:
    print(f"halo-cluster init: {line}", file=sys.stderr)
    return exits.ERROR
