"""The cluster.yml schema: every key, its type, its default and its meaning, in one table.

The validator walks this table (unknown keys, types, choices, defaults) and docs/configuration.md is
checked against it by a unit test, so the documentation cannot drift from the code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from halo_cluster.config import rules

REQUIRED = object()  # sentinel default: the key must be present
DERIVED = object()  # sentinel default: computed from other keys (see `meaning`)


@dataclass(frozen=True)
class Field:
    path: str  # dotted, with `[]` for list items: "nodes[].ssh.host"
    type: str  # string, integer, boolean, list of strings, mapping, list of mappings
    default: Any
    meaning: str
    choices: tuple[str, ...] = ()
    rule: rules.Rule | None = None  # for a list: applied to each item

    @property
    def default_text(self) -> str:
        if self.default is REQUIRED:
            return "required"
        if self.default is DERIVED:
            return "derived"
        if self.default is None:
            return "none"
        if isinstance(self.default, bool):
            return str(self.default).lower()
        if isinstance(self.default, list):
            return "[]"
        return str(self.default)


DEFAULT_IMAGE = "docker.io/kyuz0/vllm-therock-gfx1151:latest"
DEFAULT_TOOLBOX = "vllm-therock-gfx1151"
DEFAULT_SUBNETS = {"roce": "192.168.100.0/30", "thunderbolt": "192.168.2.0/30"}
MTU_RANGES = {"roce": (1280, 9216), "thunderbolt": (68, 65522)}

SCHEMA: tuple[Field, ...] = (
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
    Field("mtu", "integer", 9000, "MTU of the data link (roce 1280-9216, thunderbolt 68-65522)."),
    Field(
        "cluster_user",
        "string",
        REQUIRED,
        "Unprivileged user who runs the toolbox and the cluster launcher (created when missing); "
        "a regular login user, never root or a system account.",
        rule=rules.cluster_user,
    ),
    Field(
        "reboot",
        "string",
        "never",
        "`never`: only report nodes that need a reboot for kernel "
        "arguments; `if-needed`: reboot them one at a time, workers first.",
        ("never", "if-needed"),
    ),
    Field(
        "reboot_timeout",
        "integer",
        600,
        "Seconds a rebooted node may take to come back before the deploy fails it.",
        rule=rules.reboot_timeout,
    ),
    Field(
        "image",
        "string",
        DEFAULT_IMAGE,
        "Container image of the vLLM toolbox; `name@sha256:...` pins a digest.",
        rule=rules.image_reference,
    ),
    Field("image_update", "boolean", False, "Pull the image again even when it is present."),
    Field(
        "toolbox",
        "string",
        DEFAULT_TOOLBOX,
        "Name of the toolbox container.",
        rule=rules.container_name,
    ),
    Field("kernel", "mapping", {}, "Kernel command line arguments (see the `kernel.*` keys)."),
    Field(
        "kernel.gtt_gib",
        "integer",
        124,
        "GTT size in GiB; gives `amdgpu.gttsize=GiB*1024` "
        "and `ttm.pages_limit=GiB*262144` (124 gives 126976 and 32505856).",
        rule=rules.gtt_gib,
    ),
    Field(
        "kernel.iommu",
        "string",
        "pt",
        "`pt` adds `iommu=pt` (and removes `amd_iommu=off`); "
        "`off` adds `amd_iommu=off` (and removes `iommu=pt`).",
        ("pt", "off"),
    ),
    Field("kernel.pci_realloc", "boolean", True, "Add `pci=realloc` (false removes it)."),
    Field("kernel.pcie_aspm_off", "boolean", True, "Add `pcie_aspm=off` (false removes it)."),
    Field(
        "kernel.extra_args",
        "list of strings",
        [],
        "Further arguments to add, `key=value` or a bare flag.",
        rule=rules.kernel_argument,
    ),
    Field(
        "kernel.remove_args",
        "list of strings",
        [],
        "Arguments to remove: `key` removes every value of that key, `key=value` only that one.",
        rule=rules.kernel_argument,
    ),
    Field("verify", "mapping", {}, "Thresholds of `make verify` (see `verify.*`)."),
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
        "serve",
        "mapping",
        {},
        "Ray on every node and `vllm serve` on the head as rootless services (see `serve.*` and "
        "docs/roles/serve.md). Off by default.",
    ),
    Field("serve.enabled", "boolean", False, "Start and keep the cluster serving."),
    Field(
        "serve.model",
        "string",
        None,
        "Hugging Face id (`org/name`, the hub's characters, no `.`/`..` segments) or an absolute "
        "path that exists on every node (not a system folder); required when `serve.enabled`.",
        rule=rules.model,
    ),
    Field(
        "serve.served_model_name",
        "string",
        None,
        "Name the API answers to (`--served-model-name`); default: the model.",
        rule=rules.served_model_name,
    ),
    Field(
        "serve.tensor_parallel_size",
        "integer",
        DERIVED,
        "Default: the number of nodes. TP x PP must equal the number of nodes (one GPU each).",
        rule=rules.positive,
    ),
    Field("serve.pipeline_parallel_size", "integer", 1, "Pipeline stages.", rule=rules.positive),
    Field(
        "serve.port",
        "integer",
        8000,
        "vLLM's HTTP port on the head: 1024-65535, not 22 and not one of Ray's ports (6379-6385, "
        "10001-10199).",
        rule=rules.serve_port,
    ),
    Field(
        "serve.listen",
        "string",
        "data",
        "`data`: the head's data address only; `all`: every address (then `serve.api_key_file` "
        "is required).",
        ("data", "all"),
    ),
    Field(
        "serve.api_key_file",
        "string",
        None,
        "File on the controller holding the API key (relative to cluster.yml); installed 0600 "
        "for the cluster user, never in a unit file, the log or `ps`.",
        rule=rules.file_path,
    ),
    Field(
        "serve.hf_token_file",
        "string",
        None,
        "File on the controller holding a Hugging Face token (relative to cluster.yml); "
        "installed 0600 as `~/.config/halo-cluster/hf-token` on every node and read through "
        "`HF_TOKEN_PATH` by `hf download` and vLLM; never in an argument or an environment file.",
        rule=rules.file_path,
    ),
    Field(
        "serve.ray_token_file",
        "string",
        None,
        "File on the controller holding Ray's cluster token (relative to cluster.yml). Default: "
        "made once, 64 random hex digits, in `.halo-cluster/ray-token` beside cluster.yml (0600). "
        "Installed 0600 on every node; Ray 2.52 and later refuse a client without it.",
        rule=rules.file_path,
    ),
    Field(
        "serve.gpu_memory_utilization",
        "number",
        0.9,
        "`--gpu-memory-utilization`; 0.95 runs out of memory on this APU.",
        rule=rules.gpu_memory_utilization,
    ),
    Field("serve.max_model_len", "integer", None, "`--max-model-len`.", rule=rules.positive),
    Field("serve.max_num_seqs", "integer", None, "`--max-num-seqs`.", rule=rules.positive),
    Field("serve.enforce_eager", "boolean", True, "`--enforce-eager` (no graph capture)."),
    Field(
        "serve.extra_args",
        "list of strings",
        [],
        "Further `vllm serve` arguments, one per item (`--trust-remote-code`, `--dtype=auto`); "
        "never a flag the tool sets (see Owned flags).",
        rule=rules.serve_argument,
    ),
    Field(
        "serve.env",
        "map of strings",
        {},
        "Extra environment of the Ray and vLLM containers (`NAME: value`, names "
        "`[A-Z_][A-Z0-9_]*`, one-line values); never a variable the tool sets (see Pinned "
        "variables).",
        rule=rules.environment,
    ),
    Field(
        "serve.ready_timeout",
        "integer",
        1800,
        "Seconds the deploy waits for vLLM's /health (a real model load takes minutes); "
        "`--data halo_serve_wait=false` skips the wait.",
        rule=rules.ready_timeout,
    ),
    Field(
        "serve.wait",
        "boolean",
        True,
        "Wait for /health at the end of the deploy (`--data halo_serve_wait=false` skips it).",
    ),
    Field(
        "serve.nccl_debug",
        "boolean",
        False,
        "`NCCL_DEBUG=INFO` for vLLM's RCCL: `make verify` then reads which transport RCCL used.",
    ),
    Field(
        "serve.download",
        "boolean",
        False,
        "Prefetch the weights on every node (the image's `hf download`) before starting.",
    ),
    Field(
        "serve.object_store_mib",
        "integer",
        None,
        "Ray's object store per node in MiB, 75 (Ray's minimum) to 65536 (half of a 128 GiB "
        "node); default Ray's own (30% of memory). The lab sets 256.",
        rule=rules.object_store_mib,
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

FIELDS: dict[str, Field] = {f.path: f for f in SCHEMA}


def children_of(prefix: str) -> dict[str, Field]:
    """Fields directly below `prefix` ("" for the top level, "nodes[]" for a node), by key."""
    result = {}
    for field in SCHEMA:
        parent, _, key = field.path.rpartition(".")
        if parent == prefix:
            result[key] = field
    return result


def host_name(path: str) -> str:
    """The host data name of a top-level key: `kernel.gtt_gib` -> `halo_kernel_gtt_gib`."""
    return "halo_" + path.replace(".", "_")


def variable_default_text(name: str) -> str:
    """How a role's docs table shows a variable's default: the schema's, else `derived`."""
    by_name = {host_name(f.path): f for f in SCHEMA if "[]" not in f.path}
    return by_name[name].default_text if name in by_name else "derived"


def markdown_table() -> str:
    """The schema as the table in docs/configuration.md (`python -m halo_cluster.config.schema`)."""
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for f in SCHEMA:
        choices = f" One of: {', '.join(f'`{c}`' for c in f.choices)}." if f.choices else ""
        rows.append(f"| `{f.path}` | {f.type} | {f.default_text} | {f.meaning}{choices} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
