"""The kernel arguments the tool owns: one table derived from the role (`ARGUMENTS`), refused by
name in `kernel.extra_args` and `kernel.remove_args` with the key to use, and shown in the docs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from halo_cluster.config.loader import load_cluster
from halo_cluster.decide import cmdline
from halo_cluster.roles import docs
from halo_cluster.roles.kernel import schema
from tests.unit.configs import VALID_ROCE, problems, write

KERNEL_PAGE = docs.ROOT / "docs" / "roles" / "kernel.md"


def kernel(tmp_path: Path, section: str):
    return load_cluster(write(tmp_path, VALID_ROCE + f"kernel: {section}\n")).kernel


def test_every_argument_the_role_gives_is_owned(tmp_path: Path) -> None:
    """Whatever the keys say, each argument derive adds or removes has its name in the table."""
    owned = schema.owned()
    for section in ("{}", "{iommu: 'off', pci_realloc: false, pcie_aspm_off: false, gtt_gib: 8}"):
        derived = kernel(tmp_path, section)
        for arg in (*derived.args, *derived.args_remove):
            assert cmdline.key_of(arg) in owned, arg
    assert owned == {
        "iommu": "kernel.iommu",
        "amd_iommu": "kernel.iommu",
        "pci": "kernel.pci_realloc",
        "pcie_aspm": "kernel.pcie_aspm_off",
        "amdgpu.gttsize": "kernel.gtt_gib",
        "ttm.pages_limit": "kernel.gtt_gib",
    }


@pytest.mark.parametrize(
    ("key", "arg", "use"),
    [
        ("extra_args", "ttm.pages_limit=1024", "kernel.gtt_gib"),
        ("extra_args", "amdgpu.gttsize=131072", "kernel.gtt_gib"),
        ("extra_args", "iommu=off", "kernel.iommu"),
        ("extra_args", "pci=noaer", "kernel.pci_realloc"),
        ("remove_args", "amdgpu.gttsize", "kernel.gtt_gib"),
        ("remove_args", "pcie_aspm", "kernel.pcie_aspm_off"),
        ("remove_args", "amd_iommu=on", "kernel.iommu"),
    ],
)
def test_an_owned_argument_is_refused_with_its_key(
    tmp_path: Path, key: str, arg: str, use: str
) -> None:
    found = problems(tmp_path, VALID_ROCE + f"kernel: {{{key}: ['{arg}']}}\n")
    assert found == [
        f"{tmp_path / 'cluster.yml'}: kernel.{key}[0]: {arg!r} is an argument the tool sets: "
        f"use {use}"
    ]


def test_an_argument_given_twice_by_name_is_refused(tmp_path: Path) -> None:
    found = problems(tmp_path, VALID_ROCE + "kernel: {extra_args: [quiet, 'foo=1', 'foo=2']}\n")
    assert found == [
        f"{tmp_path / 'cluster.yml'}: kernel.extra_args[2]: 'foo' is already given as "
        "kernel.extra_args[1]"
    ]


@pytest.mark.parametrize(
    ("key", "arg", "use"),
    [
        ("extra_args", "ttm.pages-limit=1024", "kernel.gtt_gib"),
        ("extra_args", "pcie-aspm=force", "kernel.pcie_aspm_off"),
        ("extra_args", "amd-iommu=on", "kernel.iommu"),
        ("remove_args", "ttm.pages-limit", "kernel.gtt_gib"),
    ],
)
def test_an_owned_argument_spelt_with_dashes_is_refused(
    tmp_path: Path, key: str, arg: str, use: str
) -> None:
    """The kernel matches a name with '-' and '_' alike (parameq): `pcie-aspm=force` is
    `pcie_aspm=force`."""
    found = problems(tmp_path, VALID_ROCE + f"kernel: {{{key}: ['{arg}']}}\n")
    assert found == [
        f"{tmp_path / 'cluster.yml'}: kernel.{key}[0]: {arg!r} is an argument the tool sets: "
        f"use {use}"
    ]


def test_one_name_spelt_two_ways_is_given_twice(tmp_path: Path) -> None:
    text = "kernel: {extra_args: ['foo_bar=1', 'foo-bar=2'], remove_args: [foo-bar]}\n"
    found = problems(tmp_path, VALID_ROCE + text)
    assert found == [
        f"{tmp_path / 'cluster.yml'}: kernel.extra_args[1]: 'foo_bar' is already given as "
        "kernel.extra_args[0]",
        f"{tmp_path / 'cluster.yml'}: kernel.remove_args[0]: 'foo-bar' is also an argument to add "
        "('foo_bar=1', by name)",
    ]


def test_remove_args_compares_by_name(tmp_path: Path) -> None:
    found = problems(tmp_path, VALID_ROCE + "kernel: {extra_args: ['foo=1'], remove_args: [foo]}\n")
    assert found == [
        f"{tmp_path / 'cluster.yml'}: kernel.remove_args[0]: 'foo' is also an argument to add "
        "('foo=1', by name)"
    ]


def test_other_arguments_still_pass(tmp_path: Path) -> None:
    derived = kernel(tmp_path, "{extra_args: ['amd_pstate=active', quiet], remove_args: [rhgb]}")
    assert derived.args[-2:] == ("amd_pstate=active", "quiet")
    assert derived.args_remove[-1] == "rhgb"


def test_the_docs_show_the_owned_table() -> None:
    page = KERNEL_PAGE.read_text()
    assert schema.owned_table() in page
    for name, key in schema.owned().items():
        assert f"| `{name}` | `{key}` |" in page
    assert docs.stale() == []


def test_a_stale_owned_table_is_rewritten_in_place() -> None:
    block = docs.role_tables()[KERNEL_PAGE]["owned kernel arguments"]
    page = KERNEL_PAGE.read_text()
    stale = page.replace("| `pci` |", "| `pci-old` |")
    assert docs.with_named(stale, "owned kernel arguments", block) == page
    assert docs.with_named("# Role\n", "owned kernel arguments", block) == "# Role\n\n" + block


# what a user might write, shell-hostile or not; each the rule takes must reach grub as written
GRUB_CANDIDATES = (
    "x=$(touch${IFS}ran)",
    "x=`touch${IFS}ran`",
    "x=${HOME}",
    "x=$HOME",
    "x=a;>ran",
    "x=a|>ran",
    "x=a&>ran",
    "x=a\x00b",
    "x=a\x1bb",
    "console=ttyS0,115200n8",
    "amd_pstate=active",
    "x=<y>",
)


def test_an_argument_a_shell_would_expand_is_refused(tmp_path: Path) -> None:
    """/etc/default/grub is sourced by grub2-mkconfig's shell, the arguments inside double quotes:
    '$' and '`' would run there."""
    found = problems(tmp_path, VALID_ROCE + "kernel: {extra_args: ['x=$(reboot)', 'y=`id`']}\n")
    assert [line.split(": ", 2)[1:] for line in found] == [
        [f"kernel.extra_args[{i}]", f"{arg!r} is not a single kernel argument (no spaces, quotes, "
         "backslashes, '$' or '`')"]
        for i, arg in enumerate(["x=$(reboot)", "y=`id`"])
    ]  # fmt: skip


@pytest.mark.parametrize("shell", ["/bin/sh", "/bin/bash"])
def test_every_accepted_argument_reaches_grub_as_written(shell: str, tmp_path: Path) -> None:
    from halo_cluster.config import rules

    taken = [arg for arg in GRUB_CANDIDATES if rules.kernel_argument(arg) is None]
    assert "console=ttyS0,115200n8" in taken and "x=a;>ran" in taken
    grub = tmp_path / "grub"
    grub.write_text(cmdline.edit_grub_defaults('GRUB_CMDLINE_LINUX="rhgb quiet"\n', taken, []))
    sourced = subprocess.run(
        [shell, "-c", '. ./grub && printf "%s" "$GRUB_CMDLINE_LINUX"'],
        capture_output=True,
        cwd=tmp_path,
        timeout=10,
    )
    assert sourced.returncode == 0, sourced.stderr
    assert sourced.stdout.decode() == " ".join(["rhgb", "quiet", *taken])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grub"]  # nothing ran
