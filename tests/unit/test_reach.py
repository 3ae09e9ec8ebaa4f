"""A down node said once: ssh's stderr sorted into its reason by one pure function, on the
messages OpenSSH (and paramiko, pyinfra's) really print, and the one line that names the node."""

from __future__ import annotations

import pytest
import yaml

from halo_cluster.config.loader import parse_cluster
from halo_cluster.tools import reach, transport

CLUSTER = parse_cluster(
    yaml.safe_load(
        "cluster_user: vllm\nnodes:\n"
        "  - {name: a, ssh: {host: 10.0.0.1, port: 2222}, data: {interface: eth1}}\n"
        "  - {name: b, ssh: {host: h2}, data: {interface: eth1}}\n"
    )
)

REAL = [
    ("ssh: connect to host 127.0.0.1 port 9: Connection refused", "refused"),
    ("ssh: connect to host 10.0.0.9 port 22: Connection timed out", "timed out"),
    ("Connection to 10.255.255.1 port 22 timed out", "timed out"),
    ("Connection timed out during banner exchange", "timed out"),
    ("Host key verification failed.", "host key"),
    (
        "@@@@@@@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n"
        "Host key verification failed.",
        "host key",
    ),
    ("root@127.0.0.1: Permission denied (publickey).", "authentication"),
    ("fedora@10.0.0.1: Permission denied (publickey,gssapi-keyex,password).", "authentication"),
    ("ssh: Could not resolve hostname nosuch.invalid: Name or service not known", "unknown host"),
    ("ssh: connect to host 10.0.0.9 port 22: No route to host", "no route"),
    ("ssh: connect to host 10.0.0.9 port 22: Network is unreachable", "no route"),
    ("kex_exchange_identification: read: Connection reset by peer", "connection reset"),
    ("Connection closed by 10.0.0.1 port 22", "connection closed"),
    (
        "Warning: Identity file x missing.\nssh: connect to host h port 9: Connection refused",
        "refused",
    ),
    # pyinfra's (paramiko's) lines: a timeout and a refused login name their cause, a refused
    # connection does not (drift then asks ssh)
    ("Could not connect (timed out)", "timed out"),
    ("SSH error (Authentication failed.)", "authentication"),
    ("Could not connect ([Errno None] Unable to connect to port 9 on ::1)", transport.UNREACHABLE),
    ("something else entirely", transport.UNREACHABLE),
    ("", transport.UNREACHABLE),
]


@pytest.mark.parametrize(("stderr", "cause"), REAL)
def test_ssh_stderr_gives_its_reason(stderr: str, cause: str) -> None:
    found, said = transport.reason(stderr)
    assert found == cause
    assert said and "\n" not in said


def test_the_line_names_the_node_its_address_and_ssh_own_words() -> None:
    refused = "ssh: connect to host 10.0.0.1 port 2222: Connection refused"
    line = reach.line(CLUSTER.nodes[0], refused)
    assert line == (
        "a (10.0.0.1:2222): cannot be reached: refused "
        "(ssh: connect to host 10.0.0.1 port 2222: Connection refused)"
    )
    silent = transport.Result(CLUSTER.nodes[1], transport.TIMED_OUT, "", "", transport.silence(60))
    assert reach.down(silent) == ("b (h2:22): cannot be reached: timed out (no answer within 60 s)")


def test_a_long_message_is_cut_to_one_short_line() -> None:
    _, said = transport.reason("x" * 1000 + " Connection refused")
    assert len(said) == 200
