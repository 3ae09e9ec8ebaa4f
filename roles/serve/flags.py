"""What the serve role passes to `vllm serve`, declared once: each flag, the host data it comes
from and how it is rendered. `argv()`, the refusal of an owned flag in `serve.extra_args` and the
docs' flag table (docs/roles/serve.md, written by `python -m halo_cluster.roles`) all read `FLAGS`.

A flag the tool sets would be undone by the same flag later in `serve.extra_args` (vLLM takes the
last), and so would the flags that take the place of those (a Unix socket instead of host and
port, a config file of flags, a second parallelism dimension): those are in the table too, with
nothing to render, so that they are refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from halo_cluster.config import rules
from halo_cluster.config.quoting import quote
from halo_cluster.config.schema import host_name

POSITIONAL = "positional"  # the value alone, first: `vllm serve MODEL`
VALUE = "value"  # `--flag=VALUE`, always
OPTIONAL = "optional"  # `--flag=VALUE` when the value is set
SWITCH = "switch"  # `--flag` when true: a boolean flag (argparse's BooleanOptionalAction)
REFUSED = "refused"  # never passed: it would replace one of the above


@dataclass(frozen=True)
class Flag:
    """One long flag of `vllm serve` the tool owns.

    `instead`: the key to use instead (what a refusal and the docs say); `source`: the key or
    derived value (`serve.bind_address`) it is rendered from, as host data; `constant`: a value
    the tool always passes; `aliases`: vLLM's single-dash spellings; `family`: every longer flag
    starting with this name is owned too (`--data-parallel-size`, `--data-parallel-address`,
    ...); `launcher`: passed only with this `serve.launcher` (refused in `serve.extra_args`
    with either); `note`: why, in the docs."""

    name: str
    instead: str
    form: str = VALUE
    source: str | None = None
    constant: str | None = None
    aliases: tuple[str, ...] = ()
    family: bool = False
    launcher: str = ""
    note: str = ""

    def rendered(self, data: Any) -> list[str]:
        """This flag's words in `vllm serve`'s arguments (none when unset or false, or when
        the cluster runs another launcher than the flag's)."""
        if self.launcher and self.launcher != data.halo_serve_launcher:
            return []
        value = self.constant if self.source is None else getattr(data, host_name(self.source))
        if self.form == POSITIONAL:
            return [str(value)]
        if self.form == SWITCH:
            return [f"--{self.name}"] if value else []
        if self.form == REFUSED or (self.form == OPTIONAL and not value):
            return []
        return [f"--{self.name}={value}"]


NATIVE = "native"  # the launcher the multi-node flags belong to (`serve.launcher`)
# derived per node in argv(), not host data: each node's own
NODE_RANK, HEADLESS = "serve.node_rank", "serve.headless"
# with `listen: all`, the API server's fence of /metrics (metricsfence.py, installed on the
# head as halo_metrics_fence.py): derived per node, only the head's rank 0 serves the API
FENCE = "serve.metrics_fence"
FENCE_CLASS = "halo_metrics_fence.MetricsFence"
DATA_PARALLEL = "serve.tensor_parallel_size and serve.pipeline_parallel_size (one GPU per node)"
FLAGS = (
    Flag("model", "serve.model", POSITIONAL, "serve.model"),
    Flag(
        "host",
        "serve.listen",
        source="serve.bind_address",
        note="the head's data address with `listen: data`, 0.0.0.0 with `all`",
    ),
    Flag("port", "serve.port", source="serve.port"),
    Flag(
        "middleware",
        "serve.listen",
        OPTIONAL,
        FENCE,
        note=f"on the head with `listen: all`, `{FENCE_CLASS}`: the fence of vLLM's /metrics",
    ),
    Flag(
        "uds", "serve.listen and serve.port", REFUSED, note="a Unix socket instead of host and port"
    ),
    Flag("api-key", "serve.api_key_file", REFUSED, note="the key stays out of argv"),
    Flag("served-model-name", "serve.served_model_name", source="serve.served_model_name"),
    Flag(
        "tensor-parallel-size",
        "serve.tensor_parallel_size",
        source="serve.tensor_parallel_size",
        aliases=("tp",),
        note="TP x PP = nodes is checked",
    ),
    Flag(
        "pipeline-parallel-size",
        "serve.pipeline_parallel_size",
        source="serve.pipeline_parallel_size",
        aliases=("pp",),
    ),
    Flag("data-parallel", DATA_PARALLEL, REFUSED, aliases=("dp",), family=True),
    Flag(
        "distributed-executor-backend",
        "serve.launcher",
        source="serve.executor_backend",
        note="`ray`, or `mp` with `launcher: native`",
    ),
    Flag("nnodes", "serve.launcher", source="serve.nnodes", aliases=("n",), launcher=NATIVE),
    Flag(
        "node-rank",
        "serve.launcher",
        source=NODE_RANK,
        aliases=("r",),
        launcher=NATIVE,
        note="the node's place in `nodes`, the head's 0",
    ),
    Flag(
        "master-addr",
        "serve.launcher",
        source="serve.master_addr",
        launcher=NATIVE,
        note="the head's data address",
    ),
    Flag("master-port", "serve.master_port", source="serve.master_port", launcher=NATIVE),
    Flag(
        "gpu-memory-utilization",
        "serve.gpu_memory_utilization",
        source="serve.gpu_memory_utilization",
    ),
    Flag("max-model-len", "serve.max_model_len", OPTIONAL, "serve.max_model_len"),
    Flag("max-num-seqs", "serve.max_num_seqs", OPTIONAL, "serve.max_num_seqs"),
    Flag("enforce-eager", "serve.enforce_eager", SWITCH, "serve.enforce_eager"),
    Flag(
        "headless",
        "serve.launcher",
        SWITCH,
        HEADLESS,
        launcher=NATIVE,
        note="every node but the head: the head serves the API",
    ),
    Flag(
        "config",
        "serve.extra_args, one flag per item (a config file can set any flag)",
        REFUSED,
    ),
)


def argv(data: Any) -> list[str]:
    """`vllm serve` arguments from host data, each a plain word (every value passed its rule),
    then the user's `serve.extra_args`."""
    node = _Node(data)
    return [*(word for flag in FLAGS for word in flag.rendered(node)), *data.halo_serve_extra_args]


def node_rank(data: Any) -> int:
    """The node's rank with `launcher: native`: the head's 0, then the workers in the order of
    `nodes` (hostdata.py keeps it in `halo_worker_addresses`)."""
    workers = list(data.halo_worker_addresses)
    address = data.halo_data_address
    return 1 + workers.index(address) if address in workers else 0


def fenced(data: Any) -> bool:
    """Whether this node's `vllm serve` fences /metrics: the API server's node (the head, rank 0
    with either launcher) of a cluster serving on every address (`listen: all`)."""
    return data.halo_serve_listen == "all" and node_rank(data) == 0


class _Node:
    """Host data with the values that differ between the nodes' `vllm serve`."""

    def __init__(self, data: Any) -> None:
        self._data = data

    def __getattr__(self, name: str) -> Any:
        if name == host_name(NODE_RANK):
            return node_rank(self._data)
        if name == host_name(HEADLESS):
            return node_rank(self._data) > 0
        if name == host_name(FENCE):
            return FENCE_CLASS if fenced(self._data) else None
        return getattr(self._data, name)


def _flag_name(argument: str) -> tuple[str, bool] | None:
    """(name without dashes, is long) of an option word, as vLLM's parser reads it, or None.

    vLLM's FlexibleArgumentParser turns `_` into `-` up to the first `.` (`--a_b.c` is `--a-b`
    with a JSON sub-key), takes `--flag=value` and `--flag value`, and argparse accepts unique
    prefixes of long flags (`--hos` is `--host`).
    """
    if argument.startswith("--"):
        return argument[2:].split("=", 1)[0].split(".", 1)[0].replace("_", "-"), True
    if argument.startswith("-") and len(argument) > 1 and not argument[1].isdigit():
        return argument[1:].split("=", 1)[0], False
    return None


def _names(flag: Flag) -> tuple[str, ...]:
    """The long names refused for `flag`: its own, and `no-NAME`, which argparse takes for a
    boolean one (and a family's boolean members, `--no-data-parallel-hybrid-lb`); refused for
    every owned flag, as before the table, so that a future boolean form cannot slip through."""
    return (flag.name, f"no-{flag.name}")


def owned_flag(argument: str) -> str | None:
    """The key that sets what this `vllm serve` argument would set, or None when it is free."""
    parsed = _flag_name(argument)
    if parsed is None:
        return None
    name, long = parsed
    if not long:
        # argparse matches -t as a prefix of -tp, and -tp4 reads as -tp 4 in some versions
        for flag in FLAGS:
            if any(alias.startswith(name) or name.startswith(alias) for alias in flag.aliases):
                return flag.instead
        return None
    if not name:
        return None
    for flag in FLAGS:
        for owned in _names(flag):
            # an exact flag, a longer one of an owned family, or an abbreviation argparse expands
            if name == owned or (flag.family and name.startswith(owned)):
                return flag.instead
            if len(name) >= 3 and owned.startswith(name):
                return flag.instead
    return None


def extra_argument(value: object) -> str | None:
    """The rule of one `serve.extra_args` item: a single word that sets nothing the tool owns."""
    problem = rules.serve_argument(value)
    if problem:
        return problem
    key = owned_flag(str(value))
    return f"{quote(str(value))} sets what the tool owns: use {key}" if key else None


def _spellings(flag: Flag) -> str:
    names = [f"`--{name}`" for name in _names(flag) if not flag.family or name == flag.name]
    if flag.form == POSITIONAL:
        names.insert(0, "the model (positional)")
    if flag.family:
        names.append(f"every `--{flag.name}-*` and `--no-{flag.name}-*`")
    names += [
        f"`-{alias}`" + (f", every `-{alias}*`" if flag.family else "") for alias in flag.aliases
    ]
    return ", ".join(names)


def _passed(flag: Flag) -> str:
    if flag.form == REFUSED:
        return "never" + (f" ({flag.note})" if flag.note else "")
    value = f"{{{flag.source}}}" if flag.source else flag.constant
    shown = {
        POSITIONAL: f"`{value}`",
        VALUE: f"`--{flag.name}={value}`",
        OPTIONAL: f"`--{flag.name}={value}` when set",
        SWITCH: f"`--{flag.name}` when `{flag.source}` is true",
    }[flag.form]
    shown += f" with `launcher: {flag.launcher}`" if flag.launcher else ""
    return shown + (f" ({flag.note})" if flag.note else "")


def markdown_table() -> str:
    """The docs' flag table: every owned flag, what the tool passes, the key to use instead."""
    rows = ["| flag | the tool passes | use instead |", "|---|---|---|"]
    rows += [f"| {_spellings(f)} | {_passed(f)} | {f.instead} |" for f in FLAGS]
    return "\n".join(rows)
