"""The serving contract: what the tool itself sets for Ray and vLLM, so that cluster.yml cannot.

The serve role builds `vllm serve`'s arguments from its own keys (and refuses the flags it owns:
roles/serve/flags.py, its one table of them), pins environment variables in
serve.env, cluster.env and secrets.env, and opens Ray on fixed ports. A value in
`serve.extra_args` or `serve.env` that sets one of these again would win (vLLM takes the last
flag, the env file its last line) and silently undo the exposure model: the API key, the listen
address, Ray's token, the data interface. The rules in rules.py refuse them with the key to use.
"""

from __future__ import annotations

import re

# the cluster user's folder of the services' files, below its home (the serve role writes them,
# `halo-cluster status` reads the API key there)
SERVICE_CONFIG = ".config/halo-cluster"
# the cluster user's quadlets, below its home (the serve and metrics roles' services)
QUADLETS = ".config/containers/systemd"
# the serve role's two containers and services (Ray's, vLLM's), which the metrics role's
# image-digest series also names
SERVING_CONTAINERS = ("halo-ray", "halo-vllm")
# the two files of it other layers read (the serve role's table of them: roles/serve/files.py):
# both containers' environment, which the verification checks, and vLLM's API key
SERVE_ENV = f"{SERVICE_CONFIG}/serve.env"
SECRETS_ENV = f"{SERVICE_CONFIG}/secrets.env"


def api_key_read(home: str) -> str:
    """A shell line setting `key` to vLLM's API key from secrets.env below `home` (`"$HOME"`,
    `~vllm`): read as text, not sourced, since a key may hold any printable character."""
    return f"key=$(sed -n 's/^VLLM_API_KEY=//p' {home}/{SECRETS_ENV} 2>/dev/null); "


# the head's warm-up after each start of vLLM (roles/serve/warmup.py), which the deploy's and the
# upgrade's waits for serving wait for
WARMUP_SERVICE = "halo-warmup"
# one warm-up completion's bound: a first request compiles what the engine's start did not (the
# sampler's and the attention's kernels for its shapes, into Triton's cache): minutes at most
WARMUP_COMPLETION_SECONDS = 300
# what the warm-up may lag behind a wait for serving in seeing /health answer 200 (it polls 1 s)
WARMUP_SEEN_SECONDS = 30


def warmup_after_health(models: int) -> int:
    """What the warm-up may still take once a wait for serving saw /health answer 200."""
    return WARMUP_SEEN_SECONDS + models * WARMUP_COMPLETION_SECONDS


def warmup_wait(seconds: int) -> str:
    """A shell line of the cluster user's that waits, at most `seconds`, while the head's warm-up
    runs (its oneshot unit activating): 0 once it ended or when there is none, 1 on the bound."""
    state = f"systemctl --user is-active {WARMUP_SERVICE}.service"
    return (
        f'for i in $(seq {int(seconds)}); do [ "$({state})" = activating ] || exit 0; sleep 1; '
        "done; exit 1"
    )


# Ray's ports, pinned so that a firewall can name them (docs/roles/serve.md)
PORTS = {
    "port": 6379,
    "node-manager-port": 6380,
    "object-manager-port": 6381,
    "runtime-env-agent-port": 6382,
    "dashboard-agent-grpc-port": 6383,
    "dashboard-agent-listen-port": 6384,
    "metrics-export-port": 6385,
    "min-worker-port": 10002,
    "max-worker-port": 10199,
}
NODE_PORTS = (
    "node-manager-port",
    "object-manager-port",
    "runtime-env-agent-port",
    "dashboard-agent-grpc-port",
    "dashboard-agent-listen-port",
    "metrics-export-port",
)
# the head's Ray client server: `ray start --head` opens it unasked
RAY_CLIENT_PORT = 10001
SSH_PORT = 22
# below 1024 a port needs root (CAP_NET_BIND_SERVICE): vLLM runs as the cluster user
FIRST_UNPRIVILEGED_PORT = 1024


def ray_ports() -> list[int]:
    """Every TCP port Ray may listen on, for the firewall's checks."""
    workers = range(PORTS["min-worker-port"], PORTS["max-worker-port"] + 1)
    named = [p for name, p in PORTS.items() if "worker-port" not in name]
    return sorted({*named, RAY_CLIENT_PORT, *workers})


def pinned_port(port: int) -> str | None:
    """Why vLLM's port may not be `port`, or None."""
    if port == SSH_PORT:
        return "is SSH's port"
    if port == RAY_CLIENT_PORT:
        return "is Ray's client port (the head opens it)"
    low, high = PORTS["min-worker-port"], PORTS["max-worker-port"]
    if low <= port <= high:
        return f"is one of Ray's worker ports ({low}-{high})"
    named = {p: name for name, p in PORTS.items()}
    return f"is Ray's {named[port]}" if port in named else None


# Ray's own floor (ray_constants.OBJECT_STORE_MINIMUM_MEMORY_BYTES = 75 * 1024 * 1024): below it
# `ray start` refuses to start
OBJECT_STORE_MIN_MIB = 75
# The object store lives in /dev/shm, in the same unified memory the GPU loads the weights and the
# KV cache into; Ray's own default is 30% of it. More than half of a 128 GiB machine leaves the
# model less than it was sized for.
OBJECT_STORE_SHARE = 0.5
MACHINE_MEMORY_MIB = 128 * 1024
OBJECT_STORE_MAX_MIB = int(MACHINE_MEMORY_MIB * OBJECT_STORE_SHARE)

# Every variable the tool writes into serve.env (templates/serve/serve.env.j2), the launcher's
# cluster.env.j2 and secrets.env, and those the serve role's containers rely on: a second line
# for one of them in serve.env would win over the tool's.
PINNED_VARIABLES = frozenset(
    {
        # cluster.env.j2: the launcher's and RCCL's view of the data link
        "VLLM_HEAD_IP",
        "VLLM_WORKER_IP",
        "VLLM_REMOTE_TOOLBOX",
        "VLLM_HOST_IP",
        "VLLM_CLUSTER_TRANSPORT",
        "VLLM_ROCE_HCA",
        "NCCL_SOCKET_IFNAME",
        "GLOO_SOCKET_IFNAME",
        "NCCL_IB_HCA",
        "NCCL_IB_GID_INDEX",
        "NCCL_IB_TIMEOUT",
        "NCCL_IB_RETRY_CNT",
        "NCCL_NET_GDR_LEVEL",
        "NCCL_IB_DISABLE",
        "NCCL_NET",
        "RAY_memory_monitor_refresh_ms",
        "RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES",
        # serve.env.j2: Ray's address, identity and token, vLLM's settings
        "RAY_ADDRESS",
        "RAY_enable_metrics_collection",
        "RAY_gcs_rpc_server_reconnect_timeout_s",
        "RAY_AUTH_MODE",
        "RAY_AUTH_TOKEN_PATH",
        "VLLM_ROCM_USE_AITER",
        "VLLM_ROCM_USE_AITER_LINEAR",
        "VLLM_CONFIG_ROOT",
        "VLLM_RPC_BASE_PATH",
        "VLLM_NO_USAGE_STATS",
        "DO_NOT_TRACK",
        "TRITON_CACHE_DIR",
        "HF_HOME",
        # where huggingface_hub keeps the cache: the deploy reads, copies and weighs it there
        "HF_HUB_CACHE",
        "HUGGINGFACE_HUB_CACHE",
        "NCCL_DEBUG",
        "NCCL_DEBUG_SUBSYS",
        # vllm-engine.env: vLLM's engine start bound, from serve.ready_timeout and the model
        "VLLM_ENGINE_READY_TIMEOUT_S",
        # secrets.env.j2: never in a 0644 file
        "VLLM_API_KEY",
        "HF_TOKEN",
        "HF_TOKEN_PATH",
        "PATH",
    }
)
# the dynamic loader's and Python's own variables: they choose what code runs in the containers
PINNED_PREFIXES = ("LD_", "PYTHON")
# what to use instead, for the variables a key sets
PINNED_KEYS = {
    "VLLM_API_KEY": "serve.api_key_file",
    "HF_TOKEN": "serve.hf_token_file",
    "HF_TOKEN_PATH": "serve.hf_token_file",
    "RAY_AUTH_TOKEN_PATH": "serve.ray_token_file",
    "NCCL_DEBUG": "serve.nccl_debug",
    "NCCL_NET": "serve.transport",
    "NCCL_IB_DISABLE": "serve.transport",
    "NCCL_DEBUG_SUBSYS": "serve.nccl_debug",
    "VLLM_ENGINE_READY_TIMEOUT_S": "serve.ready_timeout",
}
# variables the tool sets only when `serve.env` does not: the user's value wins
DEFAULTED_VARIABLES = {"HF_HUB_OFFLINE": "serve.download"}
ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


def pinned_variable(name: str) -> str | None:
    """What the tool does with `name` when it pins it (the key to use, if any), else None."""
    if name in PINNED_VARIABLES or name.startswith(PINNED_PREFIXES):
        key = PINNED_KEYS.get(name)
        return f"use {key}" if key else "the tool sets it"
    return None
