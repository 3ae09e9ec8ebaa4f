"""The serve role's keys: Ray on every node, `vllm serve` on the head (`serve.*`)."""

from __future__ import annotations

from pathlib import Path

from halo_cluster.config import presets, rules
from halo_cluster.config.expansion import Expansion
from halo_cluster.config.schema import DERIVED, Field, variables
from halo_cluster.roles.serve import flags
from halo_cluster.roles.serve.files import BY_NAME

# why a key is left out of the bench's key (`Field.unmeasured`): every other serve key reaches
# vLLM or Ray as a flag or in their environment, so a result depends on it
WHERE = "where vLLM listens: the bench's client reaches it on the head either way"
SECRET = "a secret's file on the controller: where the secret is, never how vLLM serves"
DEPLOY = "how the deploy waits for vLLM, not how vLLM serves"
WATCHDOG = "how the head's watchdog checks vLLM, not how vLLM serves"

SECTION: tuple[Field, ...] = (
    Field(
        "serve",
        "mapping",
        {},
        "Ray on every node and `vllm serve` on the head as rootless services (see `serve.*` and "
        "docs/roles/serve.md). Off by default.",
    ),
    Field(
        "serve.enabled",
        "boolean",
        False,
        "Start and keep the cluster serving.",
        unmeasured="a run needs the cluster serving: true in every run",
    ),
    Field(
        "serve.model",
        "string",
        None,
        "Hugging Face id (`org/name`, the hub's characters, no `.`/`..` segments) or an absolute "
        "path that exists on every node (not a system folder); required when `serve.enabled`.",
        rule=rules.model,
    ),
    Field(
        "serve.recipe",
        "string",
        None,
        "A model recipe by name (`halo-cluster models` lists them; docs/models.md, Recipes): its "
        "keys are this section's where you write none (yours win), each checked as if you "
        "wrote it. Yours, `recipes/NAME.yml` beside cluster.yml, win over a shipped one.",
        rule=presets.name_rule,
        unmeasured="the keys it sets are in the key themselves",
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
        "serve.launcher",
        "string",
        "ray",
        "How vLLM spans the nodes. `ray`: Ray on every node, `vllm serve` on the head "
        "(`--distributed-executor-backend=ray`); `native`: vLLM's own multi-node launcher, one "
        "`vllm serve` per node (`--distributed-executor-backend=mp`, the head with the API "
        "server as node rank 0, every other node `--headless` with its rank in the order of "
        "`nodes`), no Ray, no Ray token, no object store. Switching is a deploy: the other "
        "launcher's services are stopped and removed. The default stays `ray` until the head's "
        "own rank killed is measured healing with `native` (docs/performance.md, Ray or native "
        "launcher).",
        ("ray", "native"),
    ),
    Field(
        "serve.master_port",
        "integer",
        29501,
        "With `launcher: native`: the port on the head's data address where the ranks meet "
        "(`--master-port`, torch's store); on the data link only (the firewall warns when a "
        "management zone lets it in). 1024-65535, not `serve.port`, not 22 and not one of "
        "Ray's ports.",
        rule=rules.serve_port,
        unmeasured="where the ranks meet (torch's store on the head), not how vLLM serves",
    ),
    Field(
        "serve.port",
        "integer",
        8000,
        "vLLM's HTTP port on the head: 1024-65535, not 22 and not one of Ray's ports (6379-6385, "
        "10001-10199).",
        rule=rules.serve_port,
        unmeasured=WHERE,
    ),
    Field(
        "serve.listen",
        "string",
        "data",
        "`data`: the head's data address only; `all`: every address (then `serve.api_key_file` "
        "is required).",
        ("data", "all"),
        unmeasured=WHERE,
    ),
    Field(
        "serve.api_key_file",
        "string",
        None,
        "File on the controller holding the API key (relative to cluster.yml); installed 0600 "
        "for the cluster user, never in a unit file, the log or `ps`.",
        rule=rules.file_path,
        unmeasured=SECRET,
    ),
    Field(
        "serve.hf_token_file",
        "string",
        None,
        "File on the controller holding a Hugging Face token (relative to cluster.yml); "
        f"installed 0600 as `~/{BY_NAME['hf_token'].path}` on every node and read through "
        "`HF_TOKEN_PATH` by `hf download` and vLLM; never in an argument or an environment file.",
        rule=rules.file_path,
        unmeasured=SECRET,
    ),
    Field(
        "serve.ray_token_file",
        "string",
        DERIVED,
        "File on the controller holding Ray's cluster token (relative to cluster.yml). Default: "
        "made by the first deploy, 64 random hex digits, in `ray-token` in the state folder "
        "(`.halo-cluster/` beside cluster.yml, or --state DIR) (0600), and made anew by the "
        "deploy that takes a node out (a file you give is never rewritten). "
        "Installed 0600 on every node; Ray 2.52 and later refuse a client without it.",
        rule=rules.file_path,
        unmeasured=SECRET,
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
        rule=flags.extra_argument,
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
        "`--data halo_serve_wait=false` skips the wait. Also the most vLLM's own engine start "
        "may take (`VLLM_ENGINE_READY_TIMEOUT_S`: 600 s plus 10 s a GiB of the node's share "
        "of the weights, at least vLLM's 600 s).",
        rule=rules.ready_timeout,
        unmeasured=DEPLOY,
    ),
    Field(
        "serve.wait",
        "boolean",
        True,
        "Wait for /health at the end of the deploy (`--data halo_serve_wait=false` skips it).",
        unmeasured=DEPLOY,
    ),
    Field(
        "serve.watchdog_enabled",
        "boolean",
        True,
        "With `serve.enabled`: the head's stall watchdog (`halo-watchdog`, a user service of the "
        "cluster user): while /health answers 200, one short completion every "
        "`watchdog_interval_seconds`; `watchdog_misses` in a row unanswered within "
        "`watchdog_timeout_seconds` restart the serving services on every node (docs/roles/"
        "serve.md, The stall watchdog). On by default: vLLM's /health stays 200 over a stalled "
        "or killed rank.",
        unmeasured=WATCHDOG,
    ),
    Field(
        "serve.watchdog_timeout_seconds",
        "integer",
        20,
        "Seconds the watchdog's one-token completion may take: 5-600.",
        rule=rules.between(5, 600, " s"),
        unmeasured=WATCHDOG,
    ),
    Field(
        "serve.watchdog_interval_seconds",
        "integer",
        10,
        "Seconds between two of the watchdog's checks: 1-3600.",
        rule=rules.between(1, 3600, " s"),
        unmeasured=WATCHDOG,
    ),
    Field(
        "serve.watchdog_misses",
        "integer",
        3,
        "Unanswered completions in a row that restart the services: 1-100.",
        rule=rules.between(1, 100),
        unmeasured=WATCHDOG,
    ),
    Field(
        "serve.watchdog_max_restarts_per_hour",
        "integer",
        3,
        "Restarts the watchdog makes in any hour; then it holds and says so (the head's history, "
        "its journal, `halo-cluster status`): 1-60.",
        rule=rules.between(1, 60),
        unmeasured=WATCHDOG,
    ),
    Field(
        "serve.nccl_debug",
        "boolean",
        False,
        "`NCCL_DEBUG=INFO` for vLLM's RCCL: `halo-cluster verify` then reads which transport "
        "RCCL used.",
    ),
    Field(
        "serve.download",
        "string",
        "once",
        "Where the weights come from. `once`: the head runs the image's `hf download`, then copies "
        "the snapshot to every worker over the data link (rsync as the cluster user); `every`: "
        "each node downloads; `never`: the model must be in every node's cache already (checked). "
        "With `once` and `never` the services run with `HF_HUB_OFFLINE=1` unless `serve.env` sets "
        "it. A model given as a path is never fetched or copied.",
        ("once", "every", "never"),
        unmeasured="where the weights come from, not which: the key holds the snapshot's revision",
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
        "serve.transport",
        "string",
        DERIVED,
        "RCCL's transport between the nodes. `rdma`: pinned to RoCE (`NCCL_NET=IB`), and the "
        "deploy refuses to start vLLM while the data port's RDMA device is missing or not ACTIVE; "
        "`sockets`: TCP over the data link, by choice. Default `rdma` on `roce`, `sockets` on "
        "`thunderbolt` (which refuses `rdma`).",
        ("rdma", "sockets"),
    ),
)
# a recipe (`serve.recipe`): the keys it may set, declared once: what the model needs and the
# flags known to work with it, never where vLLM listens, its secrets, its launcher or the deploy's
# waits, which are the cluster's
RECIPE_KEYS = (
    "model",
    "served_model_name",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "gpu_memory_utilization",
    "max_model_len",
    "max_num_seqs",
    "enforce_eager",
    "extra_args",
    "env",
)
EXPANSION = Expansion(
    key="serve.recipe",
    noun="recipe",
    keys=RECIPE_KEYS,
    required=("model", "tensor_parallel_size"),  # the nodes it needs: TP x PP
    shipped=Path(__file__).resolve().parent / "recipes",
    folder="recipes",
)
# host data it reads beyond its section: other sections' keys, values hostdata.py derives
READS = (
    "halo_cluster_user",
    "halo_image",
    "halo_container_digest",  # the cluster's digest from the lock (the container derivation)
    "halo_container_pinned",  # NAME@DIGEST the lock pins (its reference's name)
    "halo_container_left",  # the nodes that left cluster.yml (the lock's `left`)
    "halo_container_leaving",  # the names this config takes out: Ray's token rotates
    "halo_container_unrecorded",  # the lock's members are not the config's: the head records
    "halo_container_lock",  # the lock the head records the members in
    "halo_container_members",  # the config's nodes, recorded in the lock
    "halo_container_moved_from",  # the lock's head while the head moves (whose history counts)
    "halo_role",
    "halo_data_address",
    "halo_data_prefix",  # the data link's subnet: vLLM's /metrics answers it (metricsfence.py)
    "halo_head_address",
    "halo_worker_addresses",
    "halo_node",
    "halo_interconnect",
    "halo_toolbox",
    "halo_kernel_gtt_bytes",  # the budget's GTT when neither sysfs nor /proc/cmdline has it
    "halo_config_file",  # the fit estimate's refusal names it (fit.py)
    "halo_peers",  # the cluster's other nodes: the fit estimate's smallest TP x PP counts them
    # what model.py derives from the section (`Serving`)
    "halo_serve_gpus",
    "halo_serve_parallelism",
    "halo_serve_bind_address",
    "halo_serve_head_url",
    "halo_serve_ray_token_owned",
    "halo_serve_ray_listens",
    "halo_serve_executor_backend",
    "halo_serve_nnodes",
    "halo_serve_master_addr",
    "halo_metrics_url",  # the metrics role's Prometheus: the watchdog reads its alert there
    "halo_metrics_authorization",  # with metrics.listen: all, the header's file the watchdog sends
)
VARIABLES = variables(SECTION, READS)
# the further tables its page holds, written by `python -m halo_cluster.roles` (roles/docs.py)
TABLES = {"flags": flags.markdown_table}
# the section's typed values, `cluster.serve`, are derived in model.py (roles.derivation)
