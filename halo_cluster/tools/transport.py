"""The one way the tools reach nodes: OpenSSH over the cluster's own ssh_config (sshconfig.py),
one shared connection per node for the whole command (ControlMaster), closed at its end.

Every run gives a `Result`, never an exception: the node, the remote exit code, stdout and
stderr, and when ssh itself failed (exit 255, or no ssh client) or the node did not answer in
time (`TIMED_OUT`), the `reason` in ssh's own words sorted by `reason`/`why` (refused, timed out,
host key, authentication, ...), which reach.py turns into the node's one line. Scripts run as
`sh -s` on the node; several commands in one script are node/batch.py's format (`read`).
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from halo_cluster.config.model import Cluster, Node
from halo_cluster.node import batch
from halo_cluster.tools import sshconfig

READ_SECONDS = 60  # a node that took the connection and says nothing for this long is said
SSH_FAILED = 255  # ssh's own exit code when it could not connect (or run at all)
TIMED_OUT = 124  # a run stopped at its bound, as timeout(1) says it
CLOSE_SECONDS = 10  # `ssh -O exit` to a local socket: a master that does not answer is left
UNREACHABLE = "unreachable"  # ssh's stderr names none of the causes below
# (what ssh prints, the reason said), the first match wins: OpenSSH's messages, and paramiko's
# (pyinfra's) where they differ
CAUSES = (
    ("Connection refused", "refused"),
    ("timed out", "timed out"),
    ("Host key verification failed", "host key"),
    ("REMOTE HOST IDENTIFICATION HAS CHANGED", "host key"),
    ("Permission denied", "authentication"),
    ("Authentication failed", "authentication"),
    ("Could not resolve hostname", "unknown host"),
    ("Name or service not known", "unknown host"),
    ("No route to host", "no route"),
    ("Network is unreachable", "no route"),
    ("Connection reset", "connection reset"),
    ("Connection closed", "connection closed"),
)


def reason(stderr: str) -> tuple[str, str]:
    """SSH's reason for a failed connection, from its stderr: (the cause, one of CAUSES' or
    UNREACHABLE; ssh's line that says it, or its last line)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for marker, cause in CAUSES:
        for text in reversed(lines):
            if marker.lower() in text.lower():
                return cause, text[:200]
    return UNREACHABLE, (lines[-1][:200] if lines else "ssh exited 255 without a message")


def why(stderr: str) -> str:
    """`reason` as the end of a line: `refused (ssh: connect to host ...: Connection refused)`."""
    cause, said = reason(stderr)
    return f"{cause} ({said})"


def silence(seconds: float) -> str:
    """The reason of a run that got no answer within its bound."""
    return f"timed out (no answer within {seconds:g} s)"


@dataclass(frozen=True)
class Result:
    """One script's run on one node."""

    node: Node
    code: int  # the script's exit code; SSH_FAILED or TIMED_OUT when `reason` says why
    out: str  # stdout, undecodable bytes as surrogate escapes (batch.split reads them back)
    err: str  # stderr, undecodable bytes replaced
    reason: str = ""  # why the node was not reached or did not answer in time; "" when it did

    @property
    def reached(self) -> bool:
        return not self.reason

    @property
    def ok(self) -> bool:
        return self.reached and self.code == 0

    @property
    def error(self) -> str:
        """The node's last error line (or, not reached, the reason), "" when there is none."""
        lines = [line.strip() for line in self.err.splitlines() if line.strip()]
        return self.reason or (lines[-1][:200] if lines else "")

    def sections(self, names: Iterable[str]) -> dict[str, batch.Part]:
        """The parts of a `batch.named` script's output, by name."""
        return batch.sections(self.out, names)


class SshTransport:
    """`nodes` over the ssh_config at `config`; `connected` writes one and closes after."""

    def __init__(self, nodes: Iterable[Node], config: Path) -> None:
        self.nodes = list(nodes)
        self.config = config

    def argv(self, node: Node, *command: str) -> list[str]:
        return ["ssh", "-F", str(self.config), sshconfig.alias(node), *command]

    def run(
        self,
        node: Node,
        script: str,
        timeout: float | None = None,
        tick: Callable[[float], None] | None = None,
        every: float = 10,
    ) -> Result:
        """`script` on `node` (`sh -s`), stopped after `timeout` s (READ_SECONDS by default);
        `tick(seconds so far)` every `every` s while it runs."""
        timeout = READ_SECONDS if timeout is None else timeout
        try:
            process = subprocess.Popen(
                self.argv(node, "sh", "-s"),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except OSError as error:  # no ssh client on this machine
            return Result(node, SSH_FAILED, "", str(error), str(error))
        started, data = time.monotonic(), script.encode()
        while True:
            elapsed = time.monotonic() - started
            wait = timeout - elapsed if tick is None else min(every, timeout - elapsed)
            try:
                out, err = process.communicate(data, timeout=max(wait, 0))
                break
            except subprocess.TimeoutExpired:
                data = None  # sent already: a second communicate may not send again
                if time.monotonic() - started >= timeout:
                    return self._stopped(node, process, timeout)
                if tick is not None:
                    tick(time.monotonic() - started)
        return _result(node, process.returncode, out, err)

    def _stopped(self, node: Node, process: subprocess.Popen, timeout: float) -> Result:
        """A run past its bound: the session ended (its command stops at its next write)."""
        process.kill()
        try:
            out, err = process.communicate(timeout=CLOSE_SECONDS)
        except subprocess.TimeoutExpired:
            out, err = b"", b""
        return Result(node, TIMED_OUT, _text(out), err.decode(errors="replace"), silence(timeout))

    def on_all(
        self,
        script_of: Callable[[Node], str],
        nodes: Iterable[Node] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Result]:
        """`script_of(node)` on every node of `nodes` (all by default) at once, by name."""
        chosen = self.nodes if nodes is None else list(nodes)
        return _at_once(lambda n: self.run(n, script_of(n), timeout), chosen)

    def read(
        self, node: Node, commands: Mapping[str, str], timeout: float | None = None
    ) -> tuple[Result, dict[str, batch.Part]]:
        """Named commands in one script (node/batch.py), each one's part by its name."""
        result = self.run(node, batch.named(commands), timeout)
        return result, result.sections(commands)

    def read_all(
        self, commands_of: Callable[[Node], Mapping[str, str]], timeout: float | None = None
    ) -> dict[str, tuple[Result, dict[str, batch.Part]]]:
        """`read` of every node at once, by name: `commands_of(node)` on each."""
        return _at_once(lambda n: self.read(n, commands_of(n), timeout), self.nodes)

    def probe(self, timeout: float) -> dict[str, str]:
        """{name: reason} for the nodes that do not answer `true` within `timeout` (the others'
        connections stay open for the commands after it)."""
        found = self.on_all(lambda _: "true", timeout=timeout)
        return {name: result.reason for name, result in found.items() if not result.reached}

    def close(self) -> None:
        """Each node's shared connection ended (a master left would outlive its folder). A
        failure is not said: the command's own result says what went wrong, and a master
        left ends by ControlPersist."""
        for node in self.nodes:
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                subprocess.run(
                    ["ssh", "-F", str(self.config), "-O", "exit", sshconfig.alias(node)],
                    capture_output=True,
                    stdin=subprocess.DEVNULL,
                    timeout=CLOSE_SECONDS,
                    check=False,
                )


@contextlib.contextmanager
def connected(cluster: Cluster, nodes: Iterable[Node] | None = None) -> Iterator[SshTransport]:
    """A `SshTransport` to `nodes` (the cluster's by default) over an ssh_config of its own, for
    one command: its connections closed and its folder removed at the end."""
    with tempfile.TemporaryDirectory(prefix="halo-ssh-") as folder:
        chosen = cluster.nodes if nodes is None else nodes
        transport = SshTransport(chosen, sshconfig.write(cluster, Path(folder)))
        try:
            yield transport
        finally:
            transport.close()


def _at_once(work: Callable[[Node], Any], nodes: list[Node]) -> dict[str, Any]:
    """`work` on every node of `nodes` at once, by name in their order."""
    if not nodes:
        return {}
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        return dict(zip((n.name for n in nodes), pool.map(work, nodes), strict=True))


def _text(data: bytes) -> str:
    return data.decode(errors="surrogateescape")


def _result(node: Node, code: int, out: bytes, err: bytes) -> Result:
    text = err.decode(errors="replace")
    return Result(node, code, _text(out), text, why(text) if code == SSH_FAILED else "")
