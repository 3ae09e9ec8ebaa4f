"""The model copy's command (`copy_command`) run by this machine's sh (dash on Debian, as on the
lab's nodes) against a cache laid out as huggingface_hub keeps it, with an `rsync` that records
what it was asked: what is listed, in which order, and that a broken cache sends nothing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from halo_cluster.roles.serve.services import copy_command
from lab import hub

FAKE_RSYNC = """#!/bin/sh
echo "ARGS $*" >> "$HOME/calls"
case "$*" in *--files-from=-*) cat >> "$HOME/calls";; esac
"""
REPO = f".cache/huggingface/hub/models--{hub.MODEL.replace('/', '--')}"


def run_copy(home: Path) -> tuple[int, list[str]]:
    (home / "bin").mkdir(exist_ok=True)
    (home / "bin" / "rsync").write_text(FAKE_RSYNC)
    (home / "bin" / "rsync").chmod(0o755)
    env = {"HOME": str(home), "PATH": f"{home / 'bin'}:/usr/bin:/bin"}
    result = subprocess.run(
        copy_command("vllm", hub.MODEL, "192.168.100.2"),
        shell=True,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )
    calls = home / "calls"
    return result.returncode, calls.read_text().splitlines() if calls.exists() else []


def seeded(tmp_path: Path) -> Path:
    snapshot = hub.seed(tmp_path / ".cache" / "huggingface", os.getuid(), os.getgid())
    (tmp_path / REPO / "trees").mkdir()
    (tmp_path / REPO / "trees" / f"{hub.COMMIT}.json").write_text("{}")
    return snapshot


def test_the_blobs_links_and_tree_then_refs_main_last(tmp_path: Path) -> None:
    seeded(tmp_path)
    code, calls = run_copy(tmp_path)
    assert code == 0, calls
    first, *listed = calls[: calls.index(next(c for c in calls[1:] if c.startswith("ARGS")))]
    assert "-S --partial --size-only --files-from=- ." in first
    assert first.endswith(f"vllm@192.168.100.2:{REPO}/")
    blobs = {f"blobs/{p.name}" for p in (tmp_path / REPO / "blobs").iterdir()}
    links = {f"snapshots/{hub.COMMIT}/{name}" for name in hub.files()}
    assert set(listed) == blobs | links | {f"trees/{hub.COMMIT}.json"}
    assert (
        calls[-1].startswith("ARGS")
        and f"-c refs/main vllm@192.168.100.2:{REPO}/refs/" in calls[-1]
    )
    assert len([c for c in calls if c.startswith("ARGS")]) == 2


def test_a_cache_without_refs_main_sends_nothing(tmp_path: Path) -> None:
    seeded(tmp_path)
    (tmp_path / REPO / "refs" / "main").unlink()
    code, calls = run_copy(tmp_path)
    assert code != 0 and calls == []


def test_a_snapshot_that_cannot_be_listed_sends_nothing(tmp_path: Path) -> None:
    seeded(tmp_path)
    (tmp_path / REPO / "refs" / "main").write_text("0" * 40)  # names no snapshot folder
    code, calls = run_copy(tmp_path)
    assert code != 0 and calls == []
