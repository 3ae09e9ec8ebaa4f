"""What a node's memory is and what a serving node's memory budget reads (`decide/budget.py`):
MemTotal, the GTT (sysfs, else the kernel arguments), whether it is a container (`NodeMemory`),
and the sizes of the model's safetensors (`ModelWeights`).

The model is a Hugging Face id, looked up in the cluster user's cache as huggingface_hub keeps it
(`~USER/.cache/huggingface/hub/models--ORG--NAME`, `refs/main` naming the snapshot), or an
absolute path. Sizes are apparent sizes through the snapshot's links (`stat -L -c %s`): a
sparse file counts as its full size, as vLLM will read it.
"""

from __future__ import annotations

import shlex
from typing import TypedDict

from pyinfra.api import FactBase


def hub_folder(model: str) -> str:
    """A Hugging Face id's folder in huggingface_hub's cache, below the user's home."""
    return f".cache/huggingface/hub/models--{model.replace('/', '--')}"


def model_dir(user: str, model: str, home: str | None = None) -> str:
    """The shell words of the model's folder: an absolute path, or the snapshot refs/main names
    in the user's cache (`home`: the user's home as a shell word, default `~USER`)."""
    if model.startswith("/"):
        return shlex.quote(model)
    home = home or f"~{user}"
    repo = f"{home}/" + shlex.quote(hub_folder(model))
    return f'{repo}/snapshots/"$(cat {repo}/refs/main 2>/dev/null)"'


class MemoryInfo(TypedDict):
    """The node's memory, as `NodeMemory` reads it."""

    virt: str  # systemd-detect-virt --container: a container sees its host's memory
    memtotal_kib: int  # /proc/meminfo's MemTotal (0: not read)
    gtt_bytes: int  # the largest mem_info_gtt_total in sysfs (0: none)
    cmdline: str  # /proc/cmdline, where the GTT is set before a reboot applies it


class WeightsInfo(TypedDict):
    """The model's safetensors on the node, as `ModelWeights` reads them."""

    dir: str | None  # the model's folder (None: absent)
    weights: list[int]  # bytes of each *.safetensors in it


class MemoryReading(MemoryInfo, WeightsInfo):
    """What a node's memory budget weighs (`decide/budget.py`): both facts' readings."""


def _memory_lines() -> list[str]:
    return [
        'echo "virt $(systemd-detect-virt --container 2>/dev/null || echo none)"',
        "sed -n 's/^MemTotal: *\\([0-9]*\\) kB$/memtotal \\1/p' /proc/meminfo",
        "for f in /sys/class/drm/card*/device/mem_info_gtt_total; do "
        '[ -f "$f" ] && echo "gtt $(cat "$f")"; done',
        'echo "cmdline $(cat /proc/cmdline)"',
    ]


def _weights_lines(user: str, model: str | None, home: str | None) -> list[str]:
    if not model:
        return []
    return [
        f"d={model_dir(user, model, home)}; "
        'if [ -d "$d" ] && [ "${d%/snapshots/}" = "$d" ]; then echo "dir $d"; '
        'for f in "$d"/*.safetensors; do [ -e "$f" ] && echo "weights $(stat -L -c %s "$f")"; '
        "done; fi"
    ]


def memory_command(user: str, model: str | None, home: str | None = None) -> str:
    """Both facts' commands as one (`make status` reads a node's memory budget in its one SSH
    command); `memory_process` reads its output."""
    return "; ".join([*_memory_lines(), *_weights_lines(user, model, home), "true"])


def memory_process(output: list[str]) -> MemoryReading:
    """What `memory_command` printed, or either fact's part of it (the other's keys default)."""
    found = MemoryReading(**NodeMemory.default(), **ModelWeights.default())
    for line in output:
        kind, _, rest = line.partition(" ")
        rest = rest.strip()
        if kind == "virt":
            found["virt"] = rest
        elif kind == "memtotal" and rest.isdigit():
            found["memtotal_kib"] = int(rest)
        elif kind == "gtt" and rest.isdigit():
            found["gtt_bytes"] = max(found["gtt_bytes"], int(rest))
        elif kind == "cmdline":
            found["cmdline"] = rest
        elif kind == "dir":
            found["dir"] = rest
        elif kind == "weights" and rest.isdigit():
            found["weights"].append(int(rest))
    return found


class NodeMemory(FactBase[MemoryInfo]):
    """The node's memory: MemTotal, the GTT, the kernel arguments and whether it is a container.
    The one read of MemTotal: the preflight checks and the memory budget both weigh it."""

    @staticmethod
    def default() -> MemoryInfo:
        return MemoryInfo(virt="none", memtotal_kib=0, gtt_bytes=0, cmdline="")

    def command(self) -> str:
        return "; ".join([*_memory_lines(), "true"])

    def process(self, output: list[str]) -> MemoryInfo:
        found = memory_process(output)
        return MemoryInfo(
            virt=found["virt"],
            memtotal_kib=found["memtotal_kib"],
            gtt_bytes=found["gtt_bytes"],
            cmdline=found["cmdline"],
        )


class ModelWeights(FactBase[WeightsInfo]):
    """The sizes of the model's safetensors in the cluster user's cache, or below its path."""

    @staticmethod
    def default() -> WeightsInfo:
        return WeightsInfo(dir=None, weights=[])

    def command(self, user: str, model: str | None) -> str:
        return "; ".join([*_weights_lines(user, model, None), "true"])

    def process(self, output: list[str]) -> WeightsInfo:
        found = memory_process(output)
        return WeightsInfo(dir=found["dir"], weights=found["weights"])
