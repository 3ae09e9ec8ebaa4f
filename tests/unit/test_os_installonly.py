"""os.lock keeps the locked kernel through dnf5's install-only rotation (roles/os/installonly.py)."""

from __future__ import annotations

from halo_cluster.roles.os import installonly
from tests.recorded import fixture

FEDORA = fixture("dnf-conf-fedora.conf")


def limit(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("installonly_limit")]


def test_the_lock_lifts_fedoras_limit_and_keeps_its_line() -> None:
    held = installonly.held(FEDORA)
    assert limit(held) == ["installonly_limit=0"]
    assert installonly.MARK + "installonly_limit=3" in held
    assert held.replace(installonly.MARK + "installonly_limit=3\n", "").replace(
        "installonly_limit=0", "installonly_limit=3"
    ) == FEDORA


def test_holding_again_changes_nothing() -> None:
    once = installonly.held(FEDORA)
    assert installonly.held(once) == once


def test_without_the_lock_the_file_is_as_before() -> None:
    assert installonly.released(installonly.held(FEDORA)) == FEDORA
    assert installonly.released(FEDORA) is None  # nothing of ours: not touched


def test_a_file_without_the_limit_gets_it_in_main_and_loses_it_again() -> None:
    text = "[main]\ngpgcheck=True\n\n[other]\ninstallonly_limit=5\n"
    held = installonly.held(text)
    main = held.split("[other]")[0]
    assert limit(main) == ["installonly_limit=0"]
    assert "installonly_limit=5" in held.split("[other]")[1]  # another section's stays
    assert installonly.released(held) == text


def test_no_file_at_all() -> None:
    held = installonly.held(None)
    assert held.startswith("[main]\n") and limit(held) == ["installonly_limit=0"]
    assert installonly.released(held) == "[main]\n"
