"""Kernel command line editing: only our arguments change."""

from __future__ import annotations

from halo_cluster.decide import cmdline

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
