"""The kernel role's keys: the kernel command line (`kernel.*`), and the arguments they give."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from halo_cluster.config import rules
from halo_cluster.config.model import Cluster, Problems
from halo_cluster.config.quoting import quote
from halo_cluster.config.schema import Field, variables
from halo_cluster.decide import cmdline

SECTION: tuple[Field, ...] = (
    Field("kernel", "mapping", {}, "Kernel command line arguments (see the `kernel.*` keys)."),
    Field(
        "kernel.gtt_gib",
        "integer",
        124,
        "GTT size in GiB; gives `ttm.pages_limit=GiB*262144` and, for a kernel before 6.15, "
        "`amdgpu.gttsize=GiB*1024` (124 gives 32505856 and 126976).",
        rule=rules.gtt_gib,
    ),
    Field(
        "kernel.iommu",
        "string",
        "pt",
        "`pt` adds `iommu=pt` (and removes `amd_iommu=off`); "
        "`off` adds `amd_iommu=off` (and removes `iommu=pt`): measured 5-12 % faster, "
        "and the NPU stops working (see IOMMU).",
        ("pt", "off"),
    ),
    Field("kernel.pci_realloc", "boolean", True, "Add `pci=realloc` (false removes it)."),
    Field("kernel.pcie_aspm_off", "boolean", True, "Add `pcie_aspm=off` (false removes it)."),
    Field(
        "kernel.extra_args",
        "list of strings",
        [],
        "Further arguments to add, `key=value` or a bare flag; each name once, never one the "
        "tool owns (see Owned arguments).",
        rule=rules.kernel_argument,
    ),
    Field(
        "kernel.remove_args",
        "list of strings",
        [],
        "Arguments to remove: `key` removes every value of that key, `key=value` only that one; "
        "never an argument the tool owns or one to add, by name.",
        rule=rules.kernel_argument,
    ),
)
# host data it reads beyond its section's keys: the arguments its `derive` below gives them
READS = (
    "halo_kernel_args",
    "halo_kernel_args_remove",
)
VARIABLES = variables(SECTION, READS)


@dataclass(frozen=True)
class Kernel:
    """The arguments the `kernel.*` keys give: host data `halo_kernel_args` and
    `halo_kernel_args_remove`, read by the kernel and reboot roles; and `halo_kernel_gtt_bytes`,
    the GTT those arguments give, which the memory budget and the preflight weigh."""

    args: tuple[str, ...]
    args_remove: tuple[str, ...]
    gtt_bytes: int


def gtt_kernel_args(gtt_gib: int) -> tuple[str, str]:
    """GTT size in GiB -> (amdgpu.gttsize in MiB, ttm.pages_limit in 4 KiB pages)."""
    mib = gtt_gib * 1024
    return f"amdgpu.gttsize={mib}", f"ttm.pages_limit={mib * 256}"


Arguments = tuple[tuple[str, ...], tuple[str, ...]]  # (to add, to remove)


def param_name(arg: str) -> str:
    """The argument's name as the kernel matches it (parameq, parameqn): '-' and '_' are one,
    so `ttm.pages-limit=1` sets `ttm.pages_limit` and `pcie-aspm=force` sets `pcie_aspm`."""
    return cmdline.key_of(arg).replace("-", "_")


def _toggle(arg: str) -> Callable[[Any], Arguments]:
    return lambda on: ((arg,), ()) if on else ((), (arg,))


def _iommu(mode: Any) -> Arguments:
    return (
        (("iommu=pt",), ("amd_iommu=off",)) if mode == "pt" else (("amd_iommu=off",), ("iommu=pt",))
    )


# Every argument the tool sets, by the key that sets it: the one table `derive` builds the
# arguments from, the owned names `kernel.extra_args` and `kernel.remove_args` may not name, and
# the docs' table of them (`tables`)
ARGUMENTS: dict[str, Callable[[Any], Arguments]] = {
    "kernel.iommu": _iommu,
    "kernel.pci_realloc": _toggle("pci=realloc"),
    "kernel.pcie_aspm_off": _toggle("pcie_aspm=off"),
    "kernel.gtt_gib": lambda gib: (gtt_kernel_args(gib), ()),
}


def samples(key: str) -> tuple[Any, ...]:
    """The values of `key` that show every argument it can set: its choices, both booleans, or
    its default."""
    field = next(f for f in SECTION if f.path == key)
    if field.choices:
        return field.choices
    return (True, False) if field.type == "boolean" else (field.default,)


def owned() -> dict[str, str]:
    """Every argument name the tool sets or removes, whatever the value: the key that does."""
    found: dict[str, str] = {}
    for key, arguments in ARGUMENTS.items():
        for value in samples(key):
            for arg in (arg for group in arguments(value) for arg in group):
                found.setdefault(param_name(arg), key)
    return found


def owned_table() -> str:
    """The owned arguments as a docs table: each name, its key and what each value of the key
    does with it."""
    rows = ["| argument | set by | value: what the tool does |", "|---|---|---|"]
    for name, key in owned().items():
        does = []
        for value in samples(key):
            add, remove = ARGUMENTS[key](value)
            shown = str(value).lower() if isinstance(value, bool) else value
            does += [f"{shown}: adds `{a}`" for a in add if param_name(a) == name]
            does += [f"{shown}: removes `{a}`" for a in remove if param_name(a) == name]
        rows.append(f"| `{name}` | `{key}` | {'; '.join(does)} |")
    return "\n".join(rows)


# the page's generated tables beyond its keys (roles/docs.py writes them)
TABLES = {"owned kernel arguments": owned_table}


def derive(cluster: Cluster, problems: Problems, base_dir: Path) -> Kernel:
    keys = cluster.settings
    wanted: list[str] = []
    remove: list[str] = []
    for key, arguments in ARGUMENTS.items():
        add, drop = arguments(keys[key])
        wanted.extend(add)
        remove.extend(drop)
    # each argument passed its rule in the loader: one token, no quotes
    wanted.extend(_extra(keys["kernel.extra_args"], problems))
    remove.extend(_removed(keys["kernel.remove_args"], wanted, problems))
    return Kernel(tuple(wanted), tuple(remove), keys["kernel.gtt_gib"] * 1024**3)


def _owner_problem(arg: str) -> str | None:
    key = owned().get(param_name(arg))
    return f"{quote(arg)} is an argument the tool sets: use {key}" if key else None


def _extra(args: list[str], problems: Problems) -> list[str]:
    """`kernel.extra_args` without the refused ones: an owned argument (its key sets it), an
    argument given twice by name (the kernel takes the last, and every run would see drift)."""
    first: dict[str, int] = {}
    kept = []
    for i, arg in enumerate(args):
        name = param_name(arg)
        at = f"kernel.extra_args[{i}]"
        if problem := _owner_problem(arg):
            problems.error(at, problem)
        elif name in first:
            given = f"kernel.extra_args[{first[name]}]"
            problems.error(at, f"{quote(name)} is already given as {given}")
        else:
            first[name] = i
            kept.append(arg)
    return kept


def _removed(args: list[str], wanted: list[str], problems: Problems) -> list[str]:
    """`kernel.remove_args` compared by argument name, as the kernel reads them: never an owned
    argument, never the name of one to add."""
    adding = {param_name(arg): arg for arg in wanted}
    kept = []
    for i, arg in enumerate(args):
        at = f"kernel.remove_args[{i}]"
        if problem := _owner_problem(arg):
            problems.error(at, problem)
        elif (name := param_name(arg)) in adding:
            also = f" ({quote(adding[name])}, by name)" if adding[name] != arg else ""
            problems.error(at, f"{quote(arg)} is also an argument to add{also}")
        else:
            kept.append(arg)
    return kept
