"""The cluster.yml schema: every key, its type, its default and its meaning, declared once.

The keys the deploy itself and several roles use (nodes, SSH, the cluster user, the link, the
image) are the cluster section, `CORE`, here. A key only one role uses is declared in that role's
section, `roles/NAME/schema.py`: `roles.schema()` assembles `CORE` and every section into one
`Schema`, and an entry point that loads a config (inventory.py, the `halo-cluster` tools, the
tests) hands it to `use()` first, since the config layer imports no role.

A section may also derive typed values from its keys (a `Derivation`, handed in with the
fields): the config layer runs it without knowing the keys it reads.

The validator walks the schema (unknown keys, types, choices, defaults), the model reads its
defaults, host data names its keys `halo_<path>`, a role's `VARIABLES` are its section's keys and
the host data it names in `READS`, and the docs' keys tables are generated from it (`python -m
roles`): the cluster section's in docs/configuration.md, each role's on its page docs/roles/NAME.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, make_dataclass
from typing import Any

from halo_cluster.config import rules
from halo_cluster.config.expansion import Expansion

# the words YAML 1.1 reads as each boolean (a bare `off` is read as false); a key whose values
# are words takes the one its choices hold (`Field.word`)
BOOLEAN_WORDS: dict[bool, tuple[str, ...]] = {False: ("off", "no"), True: ("on", "yes")}

REQUIRED = object()  # sentinel default: the key must be present
DERIVED = object()  # sentinel default: computed from other keys (see `meaning`)


@dataclass(frozen=True)
class Field:
    path: str  # dotted, with `[]` for list items: "nodes[].ssh.host"
    type: str  # string, integer, boolean, list of strings or integers, mapping, list of mappings
    default: Any
    meaning: str
    choices: tuple[str, ...] = ()
    rule: rules.Rule | None = None  # for a list: applied to each item
    # why a measurement of the cluster does not depend on this key, "" when it may: a tool that
    # keys its measurements by a section's keys leaves out those with a reason
    unmeasured: str = ""

    def word(self, value: bool, written: str | None = None) -> str | None:
        """The choice a YAML 1.1 boolean stands for here: its word (`off`, as `written` when
        the reader kept it) when the key's choices hold it, else None."""
        words = BOOLEAN_WORDS[value]
        if written is not None:
            words = tuple(w for w in words if w == written.lower())
        return next((w for w in words if w in self.choices), None)

    @property
    def default_text(self) -> str:
        if self.default is REQUIRED:
            return "required"
        if self.default is DERIVED:
            return "derived"
        if self.default is None:
            return "none"
        if self.default == "":
            return '""'  # an empty cell would read as no default at all
        if isinstance(self.default, bool):
            return str(self.default).lower()
        if isinstance(self.default, list):
            return "[" + ", ".join(str(item) for item in self.default) + "]"
        return str(self.default)


DEFAULT_IMAGE = "docker.io/kyuz0/vllm-therock-gfx1151:latest"
DEFAULT_TOOLBOX = "vllm-therock-gfx1151"
DEFAULT_SUBNETS = {"roce": "192.168.100.0/30", "thunderbolt": "192.168.2.0/30"}

CORE: tuple[Field, ...] = (
    Field(
        "interconnect",
        "string",
        "roce",
        "Node-to-node link: `roce` (Intel E810, RoCE v2) or `thunderbolt` (thunderbolt-net).",
        ("roce", "thunderbolt"),
    ),
    Field(
        "subnet",
        "string",
        DERIVED,
        "IPv4 network of the data link, /8 to /30, holding no SSH host. Default 192.168.100.0/30 "
        "for roce, 192.168.2.0/30 for thunderbolt. A /30 holds two nodes; use a /29 or larger "
        "for more.",
    ),
    Field(
        "cluster_user",
        "string",
        REQUIRED,
        "Unprivileged user who runs the toolbox and the cluster launcher (created when missing); "
        "a regular login user, never root or a system account.",
        rule=rules.cluster_user,
    ),
    Field(
        "image",
        "string",
        DEFAULT_IMAGE,
        "Container image of the toolbox and the services, resolved once to the digest every "
        "node runs (halo-cluster.lock in the state folder); `name@sha256:...` is that digest.",
        rule=rules.image_reference,
    ),
    Field(
        "toolbox",
        "string",
        DEFAULT_TOOLBOX,
        "Name of the toolbox container.",
        rule=rules.container_name,
    ),
    Field("verify", "mapping", {}, "Thresholds of `halo-cluster verify` (see `verify.*`)."),
    Field(
        "verify.max_latency_us",
        "integer",
        10,
        "Highest acceptable `ib_write_lat` typical latency between head and worker, in µs "
        "(reported on this hardware: 5.23).",
    ),
    Field(
        "verify.min_bandwidth_gbps",
        "integer",
        40,
        "Lowest acceptable `ib_write_bw` average bandwidth, in Gb/s (reported: 50.6 behind the "
        "x4 riser).",
    ),
    Field(
        "ssh",
        "mapping",
        {},
        "SSH defaults for every node (see `ssh.*`); a node's own `ssh` keys win.",
    ),
    Field("ssh.port", "integer", 22, "SSH port.", rule=rules.port),
    Field(
        "ssh.user",
        "string",
        "root",
        "SSH user (root, or a user with passwordless sudo).",
        rule=rules.user_name,
    ),
    Field(
        "ssh.key",
        "string",
        None,
        "Private key file; relative paths are read from the config file's folder.",
        rule=rules.file_path,
    ),
    Field(
        "ssh.known_hosts",
        "string",
        None,
        "known_hosts file to pin host keys; when set, unknown host keys are refused.",
        rule=rules.file_path,
    ),
    Field(
        "nodes",
        "list of mappings",
        REQUIRED,
        "The machines, at least one; the first is the head unless a node says `role: head`.",
    ),
    Field(
        "nodes[].name",
        "string",
        REQUIRED,
        "Node name (pyinfra host name), unique regardless of case.",
        rule=rules.node_name,
    ),
    Field(
        "nodes[].role",
        "string",
        DERIVED,
        "`head` or `worker`; default: first node head, the others workers. Exactly one head.",
        ("head", "worker"),
    ),
    Field("nodes[].ssh", "mapping", REQUIRED, "How to reach the node (see `nodes[].ssh.*`)."),
    Field(
        "nodes[].ssh.host",
        "string",
        REQUIRED,
        "Management address or host name (no `:port`: use `ssh.port`), unique after normalising "
        "(case, trailing dot, address forms).",
        rule=rules.ssh_host,
    ),
    Field("nodes[].ssh.port", "integer", DERIVED, "Default `ssh.port`.", rule=rules.port),
    Field("nodes[].ssh.user", "string", DERIVED, "Default `ssh.user`.", rule=rules.user_name),
    Field("nodes[].ssh.key", "string", DERIVED, "Default `ssh.key`.", rule=rules.file_path),
    Field(
        "nodes[].ssh.known_hosts",
        "string",
        DERIVED,
        "Default `ssh.known_hosts`.",
        rule=rules.file_path,
    ),
    Field("nodes[].data", "mapping", {}, "The node's data link (see `nodes[].data.*`)."),
    Field(
        "nodes[].data.interface",
        "string",
        DERIVED,
        "Interface name (never `lo`), or `auto` to find the "
        "single E810 port. Default `auto` for roce, `thunderbolt0` for thunderbolt.",
    ),
    Field(
        "nodes[].data.mac",
        "string",
        None,
        "Bind the profile to this MAC address instead of a name (not together with `interface`); "
        "unicast, non-zero, unique across nodes.",
        rule=rules.mac_address,
    ),
    Field(
        "nodes[].data.address",
        "string",
        DERIVED,
        "IPv4 address in `subnet`, never a node's SSH host; default: the "
        "subnet's host addresses in node order, skipping those taken.",
    ),
)


@dataclass(frozen=True)
class Derivation:
    """A section's typed values, where a key's plain value is not enough (a value computed from
    several keys, a check across keys), declared by the role that owns the keys.

    `derive(cluster, problems, base_dir)` is given the cluster derived so far (its plain keys in
    `settings`) and reports what is wrong to `problems`; it returns a dataclass, which becomes
    `cluster.NAME` and host data `halo_NAME_FIELD` per field, or None (a check only).
    `prepare(cluster, problems, base_dir)`, when a file is loaded, makes and checks the files on
    the controller that the values name."""

    name: str
    derive: Callable[..., Any]
    prepare: Callable[..., None] | None = None


class Schema:
    """Fields assembled from sections, with the look-ups the loader, the model and the docs use."""

    def __init__(
        self,
        fields: tuple[Field, ...],
        derivations: tuple[Derivation, ...] = (),
        expansions: tuple[Expansion, ...] = (),
    ) -> None:
        self.fields = fields
        self.derivations = derivations
        self.expansions = expansions
        self.by_path: dict[str, Field] = {}
        for field in fields:
            if field.path in self.by_path:
                raise ValueError(f"schema key {field.path} is declared twice")
            self.by_path[field.path] = field

    def children_of(self, prefix: str) -> dict[str, Field]:
        """Fields directly below `prefix` ("" for the top level, "nodes[]" for a node), by key."""
        result = {}
        for field in self.fields:
            parent, _, key = field.path.rpartition(".")
            if parent == prefix:
                result[key] = field
        return result

    def default(self, path: str) -> Any:
        """The default of a key; None for a required or derived one."""
        default = self.by_path[path].default
        return None if default is REQUIRED or default is DERIVED else default

    def variable_default_text(self, name: str) -> str:
        """How a role's docs table shows a variable's default: the schema's, else `derived`."""
        by_name = {host_name(f.path): f for f in self.fields if "[]" not in f.path}
        return by_name[name].default_text if name in by_name else "derived"


_current: list[Schema] = []


def use(schema: Schema) -> Schema:
    """Make `schema` (`roles.schema()`: CORE and every role's section) the one the loader and
    the model read. An entry point calls it before loading a config."""
    _current[:] = [schema]
    return schema


def current() -> Schema:
    if not _current:
        raise RuntimeError(
            "no schema in use: an entry point calls halo_cluster.config.schema.use(roles.schema()) "
            "before loading a config"
        )
    return _current[0]


def host_name(path: str) -> str:
    """The host data name of a top-level key: `ssh.port` -> `halo_ssh_port`."""
    return "halo_" + path.replace(".", "_")


def markdown_table(fields: tuple[Field, ...]) -> str:
    """A section's keys as a docs table (`python -m halo_cluster.roles` writes them into the
    pages)."""
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for f in fields:
        choices = f" One of: {', '.join(f'`{c}`' for c in f.choices)}." if f.choices else ""
        rows.append(f"| `{f.path}` | {f.type} | {f.default_text} | {f.meaning}{choices} |")
    return "\n".join(rows)


# a key's type as a section's typed view holds it: a list as a tuple, as the view is frozen
PYTHON_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "list of strings": tuple[str, ...],
    "list of integers": tuple[int, ...],
    "map of strings": dict[str, str],
}


def section_type(name: str, section: tuple[Field, ...]) -> type:
    """A section's typed view: a frozen dataclass with one field per key of `section` below its
    mapping (`NAME.port` -> `port`), typed from the key's type, with no default (a derivation
    sets each from the document or the schema's default). Declared once, in the schema."""
    top = section[0].path
    keys = [f for f in section if f.type != "mapping" and f.path.startswith(f"{top}.")]
    members = [(f.path.removeprefix(f"{top}."), PYTHON_TYPES[f.type] | None) for f in keys]
    return make_dataclass(name, members, frozen=True)


def variables(section: tuple[Field, ...], reads: tuple[str, ...] = ()) -> tuple[str, ...]:
    """What a role may read: its section's keys as host data, then the host data it names in
    `reads` (another section's keys, or values hostdata.py derives); the keys of a list's items
    (`SECTION.LIST[].KEY`) are part of the list's value, not host data of their own."""
    own = tuple(host_name(f.path) for f in section if f.type != "mapping" and "[]" not in f.path)
    return tuple(dict.fromkeys(own + reads))
