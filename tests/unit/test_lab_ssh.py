"""The lab's SSH commands share one connection per node and user (lab/cli.py)."""

from __future__ import annotations

from pathlib import Path

from lab import cli


def test_commands_to_one_node_and_user_share_a_connection(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(cli, "MUX_DIR", tmp_path / "mux")
    argv = cli.ssh_argv("10.99.1.2")
    assert f"ControlPath={tmp_path / 'mux' / 'root@10.99.1.2'}" in argv
    assert "ControlMaster=auto" in argv and argv[-1] == "root@10.99.1.2"
    assert (tmp_path / "mux").is_dir()  # ssh fails when the socket's folder is missing
    other = cli.ssh_argv("10.99.1.2", "vllm")
    assert f"ControlPath={tmp_path / 'mux' / 'vllm@10.99.1.2'}" in other


def test_a_socket_path_too_long_for_unix_gets_its_own_connections(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(cli, "MUX_DIR", tmp_path / ("d" * 100))
    argv = cli.ssh_argv("10.99.1.2")
    assert not any(a.startswith("Control") for a in argv)
    assert argv[-1] == "root@10.99.1.2"
