"""The reboot role's wait for a node's new boot (roles/reboot/operations.py), on a fake host."""

from __future__ import annotations

import pytest
from paramiko import SSHException
from pyinfra.api import OperationError

from halo_cluster.roles.reboot import operations


class RebootingHost:
    """Answers each reconnection with the next of `answers`: True (booted), False (the old
    boot's marker), or an exception raised by the check, as when the old boot goes down."""

    name = "halo2"

    def __init__(self, answers: list[object]) -> None:
        self.answers = answers
        self.connected = False
        self.checks = 0

    def connect(self, show_errors: bool = True) -> None:
        self.connected = True

    def disconnect(self) -> None:
        self.connected = False

    def run_shell_command(self, command: str) -> tuple[bool, object]:
        assert command == operations.BOOTED
        answer = self.answers[self.checks]
        self.checks += 1
        if isinstance(answer, Exception):
            raise answer
        return bool(answer), None


def test_a_connection_lost_during_the_check_is_tried_again() -> None:
    host = RebootingHost([False, SSHException("closed"), EOFError(), True])
    assert operations._reconnect_after_boot(host, timeout=10, interval=0)
    assert host.checks == 4


def test_a_node_that_never_comes_back_fails_after_the_timeout() -> None:
    host = RebootingHost([False] * 10_000)
    with pytest.raises(OperationError, match=r"halo2 did not come back within 0\.05 s"):
        operations._reconnect_after_boot(host, timeout=0.05, interval=0.001)
