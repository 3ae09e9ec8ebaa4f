"""What a serving node's memory budget reads (`decide/budget.py`): MemTotal, the GTT (sysfs, else
the kernel arguments), whether it is a container, and the sizes of the model's safetensors.

The model is a Hugging Face id, looked up in the cluster user's cache as huggingface_hub keeps it
(`~USER/.cache/huggingface/hub/models--ORG--NAME`, `refs/main` naming the snapshot), or an
absolute path. Sizes are apparent sizes through the snapshot's links (`stat -L -c %s`): a
sparse file counts as its full size, as vLLM will read it.
"""

from __future__ import annotations

import shlex

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


def memory_command(user: str, model: str | None, home: str | None = None) -> str:
    lines = [
        'echo "virt $(systemd-detect-virt --container 2>/dev/null || echo none)"',
        "sed -n 's/^MemTotal: *\\([0-9]*\\) kB$/memtotal \\1/p' /proc/meminfo",
        "for f in /sys/class/drm/card*/device/mem_info_gtt_total; do "
        '[ -f "$f" ] && echo "gtt $(cat "$f")"; done',
        'echo "cmdline $(cat /proc/cmdline)"',
    ]
    if model:
        lines.append(
            f"d={model_dir(user, model, home)}; "
            'if [ -d "$d" ] && [ "${d%/snapshots/}" = "$d" ]; then echo "dir $d"; '
            'for f in "$d"/*.safetensors; do [ -e "$f" ] && echo "weights $(stat -L -c %s "$f")"; '
            "done; fi"
        )
    return "; ".join(lines) + "; true"


def memory_process(output: list[str]) -> dict:
    found = NodeMemory.default()
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


class NodeMemory(FactBase):
    """{"virt", "memtotal_kib", "gtt_bytes" (sysfs, 0 none), "cmdline", "dir" (the model's
    folder, None when absent), "weights": [bytes of each *.safetensors]}."""

    @staticmethod
    def default() -> dict:
        return {
            "virt": "none",
            "memtotal_kib": 0,
            "gtt_bytes": 0,
            "cmdline": "",
            "dir": None,
            "weights": [],
        }

    def command(self, user: str, model: str | None) -> str:
        return memory_command(user, model)

    def process(self, output: list[str]) -> dict:
        return memory_process(output)
