"""The memory budget of a serving node: plain numbers in, a verdict and its table row out.

On a Strix Halo the GPU and the OS share one pool (MemTotal). Per node, what may be taken at once:

- vLLM: GTT x `serve.gpu_memory_utilization` (vLLM sizes its weights plus KV cache to that share
  of the GPU memory it sees, which on this APU is the GTT);
- Ray's object store: `serve.object_store_mib`, or Ray's default when unset: 30% of the memory
  Ray sees as available when it starts (ray_constants.DEFAULT_OBJECT_STORE_MEMORY_PROPORTION,
  capped at 200 GB and by /dev/shm), counted here as 30% of MemTotal, its upper bound; none
  with `serve.launcher: native` (no Ray);
- a reserve for the OS, the containers and Ray's own processes: RESERVE_GIB.

Their sum above MemTotal is refused, except when only Ray's default object store (a ceiling Ray
fills only with objects, which vLLM rarely puts there) makes it overflow: then a warning naming
the `serve.object_store_mib` that adds up. Above NEARLY_FULL of MemTotal: a warning. The model's
weights on the node (its safetensors, divided over TP x PP) must leave vLLM room for a KV cache:
at most WEIGHTS_SHARE of vLLM's share, else refused. Where the node's memory cannot be seen (a
container sees its host's), the sum is NOT VERIFIED; the weights are still weighed against the GTT.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OK, WARN, FAIL, NOT_VERIFIED, UNKNOWN = "OK", "WARN", "FAIL", "NOT VERIFIED", "not checked"
GIB = 1024**3
# the OS (about 1.5 GiB on an idle Fedora 43 with its desktop off), the page cache a model load
# streams through, podman and Ray's raylet/GCS/dashboard processes (about 1 GiB per node): 6 GiB
# leaves each its room; the kernel role keeps 4 GiB outside the GTT (rules.OS_RESERVE_GIB)
RESERVE_GIB = 6
# weights at most this share of vLLM's memory: the rest is the KV cache and activations (vLLM
# refuses to start without room for one sequence of max_model_len; 10% is a few thousand tokens of
# a 70B model's cache)
WEIGHTS_SHARE = 0.9
NEARLY_FULL = 0.9  # of MemTotal: warn above
RAY_DEFAULT_SHARE = 0.3  # Ray's DEFAULT_OBJECT_STORE_MEMORY_PROPORTION
NO_RAY = "no Ray: serve.launcher native"  # the object store's source without one
PAGE = 4096  # ttm.pages_limit counts 4 KiB pages


@dataclass(frozen=True)
class Budget:
    node: str
    status: str  # OK, WARN, FAIL, NOT VERIFIED (the memory could not be seen)
    memtotal: int  # bytes, 0 unknown
    gtt: int  # bytes, 0 unknown
    gtt_source: str  # sysfs, kernel arguments, kernel.gtt_gib
    vllm: int
    object_store: int
    object_store_source: str  # serve.object_store_mib or Ray's default
    reserve: int
    weights: int | None  # this node's share, bytes; None not found
    problems: tuple[str, ...] = ()  # each: what is wrong and the fix
    notes: tuple[str, ...] = ()  # warnings, not verified, not checked

    @property
    def total(self) -> int:
        return self.vllm + self.object_store + self.reserve

    def row(self) -> tuple[str, ...]:
        """The table row: node, MemTotal, GTT, vLLM, object store, reserve, sum, weights, status."""
        memtotal = gib(self.memtotal) if self.memtotal else "?"
        share = f" ({self.total / self.memtotal:.0%})" if self.memtotal else ""
        weights = "not found" if self.weights is None else gib(self.weights)
        return (
            self.node,
            memtotal,
            f"{gib(self.gtt)} ({self.gtt_source})" if self.gtt else "?",
            gib(self.vllm),
            gib(self.object_store),
            gib(self.reserve),
            f"{gib(self.total)}{share}",
            weights,
            self.status,
        )


HEADER = ("node", "MemTotal", "GTT", "vLLM", "object store", "reserve", "sum", "weights", "budget")


def gib(size: int) -> str:
    return f"{size / GIB:.1f} GiB"


def gtt_from_cmdline(cmdline: str) -> int:
    """The GTT the kernel arguments set, in bytes (0 none): ttm.pages_limit pages of 4 KiB,
    amdgpu.gttsize MiB; the smaller when both (TTM limits what the GTT manager may map)."""
    sizes = []
    for key, unit in (("ttm.pages_limit", PAGE), ("amdgpu.gttsize", 1024**2)):
        match = re.search(rf"(?:^|\s)(?:amd)?{re.escape(key)}=(\d+)(?:\s|$)", cmdline)
        if match and int(match.group(1)) > 0:
            sizes.append(int(match.group(1)) * unit)
    return min(sizes) if sizes else 0


def decide(
    node: str,
    *,
    memtotal_kib: int,
    gtt_bytes: int,
    gtt_source: str,
    utilization: float,
    object_store_mib: int | None,
    weights_bytes: int | None,
    gpus: int,
    parallelism: str,
    hidden: bool = False,
    model: str = "the model",
    ray: bool = True,
) -> Budget:
    """The budget of one node. `weights_bytes`: the model's safetensors in all (None: not found),
    split over `gpus`, one per node, as `parallelism` names it (`TP 2 x PP 1`: both derived in
    the serve role's model.py); `hidden`: a container, whose MemTotal is its host's; `ray`:
    Ray runs beside vLLM (`serve.launcher: ray`), else no object store is counted."""
    memtotal = memtotal_kib * 1024
    vllm = int(gtt_bytes * utilization)
    if not ray:
        store, store_source = 0, NO_RAY
    elif object_store_mib:
        store, store_source = object_store_mib * 1024**2, "serve.object_store_mib"
    else:
        store, store_source = int(memtotal * RAY_DEFAULT_SHARE), "Ray's default, 30%"
    reserve = RESERVE_GIB * GIB
    weights = None if weights_bytes is None else -(-weights_bytes // gpus)
    problems: list[str] = []
    notes: list[str] = []
    total = vllm + store + reserve
    if hidden:
        notes.append("memory NOT VERIFIED: a container sees its host's MemTotal")
    elif not memtotal:
        notes.append("memory not checked: MemTotal could not be read")
    elif total > memtotal and (object_store_mib or vllm + reserve > memtotal):
        over = total - memtotal
        fit_util = max(0.0, (memtotal - store - reserve) / gtt_bytes) if gtt_bytes else 0
        fit_store = max(0, (memtotal - vllm - reserve) // 1024**2)
        problems.append(
            f"vLLM {gib(vllm)} (GTT {gib(gtt_bytes)} x {utilization:g}) + object store "
            f"{gib(store)} ({store_source}) + reserve {gib(reserve)} = {gib(total)} is "
            f"{gib(over)} more than MemTotal {gib(memtotal)}: set serve.gpu_memory_utilization "
            f"to at most {int(fit_util * 100) / 100:g}"
            + (f" or serve.object_store_mib to at most {fit_store}" if fit_store >= 75 else "")
            + ", or lower kernel.gtt_gib"
        )
    elif total > memtotal:
        # Ray's default is a ceiling it fills only with objects vLLM rarely puts there: a
        # warning with the value that adds up, not a refusal of the default configuration
        fit_store = max(0, (memtotal - vllm - reserve) // 1024**2)
        notes.append(
            f"nearly full: Ray's default object store {gib(store)} (30% of MemTotal) + vLLM "
            f"{gib(vllm)} + reserve {gib(reserve)} = {gib(total)} is more than MemTotal "
            f"{gib(memtotal)}: set serve.object_store_mib to at most {fit_store}"
        )
    elif total > memtotal * NEARLY_FULL:
        notes.append(
            f"nearly full: vLLM, object store and reserve take {total / memtotal:.0%} of "
            f"MemTotal {gib(memtotal)} (the OS swaps or stalls under load)"
        )
    if weights is None:
        notes.append(f"weights not checked: no *.safetensors of {model} on this node yet")
    elif gtt_bytes and weights > vllm * WEIGHTS_SHARE:
        fit_tp = -(-weights_bytes // int(vllm * WEIGHTS_SHARE)) if vllm else 0
        problems.append(
            f"{model}: weights {gib(weights)} on this node ({gib(weights_bytes)} / {parallelism}) "
            f"are more than {WEIGHTS_SHARE:.0%} of what vLLM may take, {gib(vllm)} "
            f"(GTT {gib(gtt_bytes)} x {utilization:g}): no room for the KV cache; use a larger "
            f"TP x PP (at least {fit_tp} nodes), a higher serve.gpu_memory_utilization or "
            "kernel.gtt_gib if the memory sum allows, or a smaller (quantized) model"
        )
    if problems:
        status = FAIL
    elif hidden or not memtotal:
        status = NOT_VERIFIED
    elif any(n.startswith("nearly full") for n in notes) or weights is None:
        status = WARN
    else:
        status = OK
    return Budget(
        node,
        status,
        memtotal,
        gtt_bytes,
        gtt_source,
        vllm,
        store,
        store_source,
        reserve,
        weights,
        tuple(problems),
        tuple(notes),
    )


def table(budgets: list[Budget]) -> str:
    rows = [HEADER, *(b.row() for b in budgets)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def from_reading(
    node: str,
    found: dict,
    *,
    model: str,
    utilization: float,
    object_store_mib: int | None,
    gpus: int,
    parallelism: str,
    configured_gtt_bytes: int,
    ray: bool = True,
) -> Budget:
    """A node's budget from what the NodeMemory and ModelWeights facts read (a `MemoryReading`,
    `halo_cluster/node/memory.py`): the
    GTT from sysfs, else the kernel arguments, else what kernel.gtt_gib's arguments give
    (`configured_gtt_bytes`, the kernel role's derivation: the reboot that applies it is still to
    come); the weights when the model's folder holds safetensors."""
    gtt, source = found["gtt_bytes"], "sysfs"
    if not gtt:
        gtt, source = gtt_from_cmdline(found["cmdline"]), "kernel arguments"
    if not gtt:
        gtt, source = configured_gtt_bytes, "kernel.gtt_gib"
    weights = found["weights"]
    return decide(
        node,
        memtotal_kib=found["memtotal_kib"],
        gtt_bytes=gtt,
        gtt_source=source,
        utilization=utilization,
        object_store_mib=object_store_mib,
        weights_bytes=sum(weights) if found["dir"] and weights else None,
        gpus=gpus,
        parallelism=parallelism,
        hidden=found["virt"] not in ("none", ""),
        model=model,
        ray=ray,
    )
