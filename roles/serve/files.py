"""The cluster services' files, one table: where each lives below the cluster user's home, its
mode, whether it is a secret (never shown in a diff or the log), and which service restarts when
it changes. Every list the role uses (what it writes, what only the head's vLLM needs, what a
change restarts) is read from `FILES`."""

from __future__ import annotations

from dataclasses import dataclass

from halo_cluster.config.serving import (
    QUADLETS,
    SECRETS_ENV,
    SERVE_ENV,
    SERVICE_CONFIG,
    SERVING_CONTAINERS,
    WARMUP_SERVICE,
)

UNITS = QUADLETS
SYSTEMD_USER = ".config/systemd/user"  # the user's own units (quadlets are generated elsewhere)
RAY, VLLM = SERVING_CONTAINERS
WARMUP = WARMUP_SERVICE  # the head's warm-up after each start of vLLM (warmup.py)


@dataclass(frozen=True)
class ServiceFile:
    """`restarts`: the services a change restarts (vLLM runs on Ray: Ray's restart restarts it
    too; with `serve.launcher: native` any of them restarts the ranks); `head_only`: vLLM's own,
    written on the head alone with Ray (with native every node's rank has its unit and start
    script, the secrets stay the head's) and kept while vLLM is refused."""

    name: str
    path: str  # below the user's home
    mode: str
    restarts: tuple[str, ...]
    secret: bool = False
    head_only: bool = False


FILES = (
    ServiceFile("ray_unit", f"{UNITS}/{RAY}.container", "644", (RAY,)),
    ServiceFile("vllm_unit", f"{UNITS}/{VLLM}.container", "644", (VLLM,), head_only=True),
    ServiceFile("ray_start", f"{SERVICE_CONFIG}/ray-start.sh", "755", (RAY,)),
    ServiceFile("vllm_start", f"{SERVICE_CONFIG}/vllm-start.sh", "755", (VLLM,), head_only=True),
    ServiceFile(
        "vllm_prestart", f"{SERVICE_CONFIG}/vllm-prestart.sh", "755", (VLLM,), head_only=True
    ),
    # the user's serve.env values may be secrets of theirs: 0600, but shown in a diff
    ServiceFile("env", SERVE_ENV, "600", (RAY,)),
    ServiceFile("secrets", SECRETS_ENV, "600", (VLLM,), secret=True, head_only=True),
    # with `serve.listen: all`, the head's fence of vLLM's /metrics (metricsfence.py's text)
    ServiceFile(
        "metrics_fence",
        f"{SERVICE_CONFIG}/python/halo_metrics_fence.py",
        "644",
        (VLLM,),
        head_only=True,
    ),
    ServiceFile("ray_token", f"{SERVICE_CONFIG}/ray-token", "600", (RAY,), secret=True),
    ServiceFile("hf_token", f"{SERVICE_CONFIG}/hf-token", "600", (RAY, VLLM), secret=True),
    ServiceFile(
        "non_carry_over", f"{SERVICE_CONFIG}/vllm/ray_non_carry_over_env_vars.json", "644", (RAY,)
    ),
    # which model the node holds: a change fetches it; the services read the model elsewhere
    ServiceFile("model", f"{SERVICE_CONFIG}/model", "644", ()),
    # vLLM's engine start bound (enginestart.py): read at vLLM's start only, a change restarts
    # nothing (a running engine is past its start; a restarting one takes the new bound)
    ServiceFile("engine_env", f"{SERVICE_CONFIG}/vllm-engine.env", "644", (), head_only=True),
    # the head's warm-up (warmup.py): its unit, which vLLM's quadlet there Wants, its program and
    # settings; a change restarts nothing: the next start of vLLM runs the new one
    ServiceFile("warmup_unit", f"{SYSTEMD_USER}/{WARMUP}.service", "644", (), head_only=True),
    ServiceFile("warmup_program", f"{SERVICE_CONFIG}/warmup.py", "644", (), head_only=True),
    ServiceFile("warmup_settings", f"{SERVICE_CONFIG}/warmup.json", "644", (), head_only=True),
)
BY_NAME = {f.name: f for f in FILES}
VLLM_FILES = tuple(f.name for f in FILES if f.head_only)


def paths() -> dict[str, str]:
    """Name -> path below the user's home of every file this role may write."""
    return {f.name: f.path for f in FILES}


def reloads(changed: dict[str, bool]) -> bool:
    """Whether the user's manager must reload: a unit of the table changed (a quadlet or the
    warm-up's own unit)."""
    return any(changed.get(f.name) for f in FILES if f.path.startswith((UNITS, SYSTEMD_USER)))


def restarted_by(service: str) -> tuple[str, ...]:
    """The files whose change restarts `service`."""
    return tuple(f.name for f in FILES if service in f.restarts)
