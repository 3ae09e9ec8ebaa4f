"""Kernel command line editing: only our arguments change."""

from __future__ import annotations

import re

import pytest

from halo_cluster.decide import cmdline
from tests.recorded import fixture

SEED = [
    "iommu=pt",
    "pci=realloc",
    "pcie_aspm=off",
    "amdgpu.gttsize=126976",
    "ttm.pages_limit=32505856",
]


def test_appends_missing_arguments_in_order() -> None:
    assert cmdline.edit_args("ro rhgb quiet", SEED, []) == "ro rhgb quiet " + " ".join(SEED)


def test_replaces_another_value_in_place_and_drops_duplicates() -> None:
    line = "ro amdgpu.gttsize=65536 quiet amdgpu.gttsize=1024"
    assert cmdline.edit_args(line, ["amdgpu.gttsize=126976"], []) == (
        "ro amdgpu.gttsize=126976 quiet"
    )


def test_removes_by_exact_value_or_by_key() -> None:
    line = "ro iommu=pt quiet mitigations=off mitigations=auto"
    assert cmdline.edit_args(line, [], ["iommu=pt", "mitigations"]) == "ro quiet"
    assert cmdline.edit_args("iommu=soft", [], ["iommu=pt"]) == "iommu=soft"


def test_keeps_quoted_values_variables_and_odd_spacing() -> None:
    line = 'ro dyndbg="file foo.c +p" $tuned_params amdttm.page_pool_size =27648000'
    assert cmdline.edit_args(line, ["quiet"], []) == line + " quiet"


def test_is_idempotent() -> None:
    once = cmdline.edit_args("ro rhgb quiet iommu=soft", SEED, ["amd_iommu=off"])
    assert cmdline.edit_args(once, SEED, ["amd_iommu=off"]) == once


def test_missing_args_reports_absent_and_unwanted() -> None:
    running = "BOOT_IMAGE=x ro iommu=pt amd_iommu=off"
    assert cmdline.missing_args(running, ["iommu=pt", "pcie_aspm=off"], ["amd_iommu=off"]) == [
        "pcie_aspm=off",
        "-amd_iommu=off",
    ]


def test_grub_defaults_single_quotes_and_missing_line() -> None:
    text = "GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX='rhgb quiet'\n"
    assert cmdline.edit_grub_defaults(text, ["iommu=pt"], []) == (
        "GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX='rhgb quiet iommu=pt'\n"
    )
    assert cmdline.edit_grub_defaults("GRUB_TIMEOUT=5", ["iommu=pt"], []) == (
        'GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX="iommu=pt"\n'
    )


def test_grub_defaults_leaves_grub_cmdline_linux_default_alone() -> None:
    text = 'GRUB_CMDLINE_LINUX_DEFAULT="splash"\nGRUB_CMDLINE_LINUX="quiet"\n'
    assert cmdline.edit_grub_defaults(text, ["iommu=pt"], []) == (
        'GRUB_CMDLINE_LINUX_DEFAULT="splash"\nGRUB_CMDLINE_LINUX="quiet iommu=pt"\n'
    )


def test_bls_entry_without_final_newline_keeps_it_that_way() -> None:
    entry = "title F\nversion 6.18.5\noptions ro quiet"
    assert cmdline.edit_bls_entry(entry, ["iommu=pt"], []) == (
        "title F\nversion 6.18.5\noptions ro quiet iommu=pt"
    )


def test_default_entry_saved_then_newest() -> None:
    entries = {
        "/e/a-6.18.5-200.fc43.x86_64.conf": "version 6.18.5-200.fc43.x86_64\n",
        "/e/a-6.18.10-200.fc43.x86_64.conf": "version 6.18.10-200.fc43.x86_64\n",
        "/e/a-6.18.6-200.fc43.x86_64.conf": "version 6.18.6-200.fc43.x86_64\n",
    }
    assert cmdline.default_entry(entries, None) == "/e/a-6.18.10-200.fc43.x86_64.conf"
    grubenv = "# GRUB Environment Block\nsaved_entry=a-6.18.5-200.fc43.x86_64\n"
    assert cmdline.default_entry(entries, grubenv) == "/e/a-6.18.5-200.fc43.x86_64.conf"
    assert cmdline.default_entry(entries, "saved_entry=gone\n").endswith(
        "6.18.10-200.fc43.x86_64.conf"
    )
    assert cmdline.default_entry({}, None) is None


@pytest.mark.parametrize(
    ("release", "takes"),
    [
        ("6.14.0-63.fc42.x86_64", True),  # before the deprecation (6.15)
        ("6.15.0-0.rc1.20250401git.1.fc43.x86_64", False),
        ("6.17.8-300.fc43.x86_64", False),  # the recorded 6.17 dmesg warns
        ("6.18.9-200.fc43.x86_64", False),
        ("7.1.10-200.fc44.x86_64", False),
        ("5.16.5-200.fc35.x86_64", True),
        (None, True),  # unknown: as the config gives it
        ("0-rescue", True),
    ],
)
def test_gttsize_only_for_kernels_before_6_15(release: str | None, takes: bool) -> None:
    wanted = ["iommu=pt", "amdgpu.gttsize=126976", "ttm.pages_limit=32505856"]
    add, remove = cmdline.for_kernel(release, wanted, ["amd_iommu=off"])
    if takes:
        assert (add, remove) == (wanted, ["amd_iommu=off"])
    else:
        assert add == ["iommu=pt", "ttm.pages_limit=32505856"]
        assert remove == ["amd_iommu=off", "amdgpu.gttsize"]
        line = "ro amdgpu.gttsize=98304 quiet"
        assert cmdline.edit_args(line, add, remove) == (
            "ro quiet iommu=pt ttm.pages_limit=32505856"
        )


def test_the_recorded_deprecation_is_on_a_kernel_the_rule_calls_deprecated() -> None:
    """The recorded 6.17 boot with amdgpu.gttsize prints amdgpu_ttm.c's deprecation warning."""
    dmesg = fixture("dmesg-amdgpu-strix-halo-ubuntu2510-gttsize-deprecated.txt")
    release = re.search(r"Linux version (\S+)", dmesg)[1]
    assert "Configuring gttsize via module parameter is deprecated" in dmesg
    assert release.startswith("6.17.")
    add, remove = cmdline.for_kernel(release, SEED, [])
    assert "amdgpu.gttsize=126976" not in add and remove == ["amdgpu.gttsize"]
