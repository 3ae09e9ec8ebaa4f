"""The files cluster.yml names, checked on the controller when it is loaded: SSH keys,
known_hosts and the files each section prepares (a secret file). A missing, unreadable or
malformed one stops the load, naming the key, not in paramiko or in a container.
"""

from __future__ import annotations

import shlex
import stat
from pathlib import Path

from halo_cluster.config.model import Cluster, Problems
from halo_cluster.config.schema import current

SECRET_MAX_BYTES = 4096  # an API key or token is one short line


def check_files(cluster: Cluster, base_dir: Path) -> list[str]:
    """SSH keys, known_hosts and the files each section prepares (`Derivation.prepare`: secret
    files) on the controller: a missing, unreadable or malformed one stops here, naming the key
    (and the nodes that use it), not in paramiko or in a container. Returns the warnings (a
    secret others can read)."""
    problems = Problems(cluster.source)
    for what, key, attribute in (
        ("the SSH key", "ssh.key", "ssh_key"),
        ("the known_hosts", "ssh.known_hosts", "ssh_known_hosts"),
    ):
        users: dict[str, list[str]] = {}
        for node in cluster.nodes:
            if path := getattr(node, attribute):
                users.setdefault(path, []).append(node.name)
        for path, nodes in users.items():
            optional = attribute == "ssh_known_hosts"  # ssh creates a missing known_hosts
            if problem := _file_problem(path, optional):
                problems.error(key, f"{path} {problem} ({what} of {', '.join(nodes)})")
    for derivation in current().derivations:
        if derivation.prepare:
            derivation.prepare(cluster, problems, base_dir)
    problems.raise_if_any()
    return problems.warnings


def _file_problem(path: str, optional: bool = False) -> str | None:
    try:
        mode = Path(path).stat().st_mode
    except FileNotFoundError:
        return None if optional else "is missing"
    except OSError:
        return "cannot be read"
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    if not stat.S_ISREG(mode):
        return "is not a regular file"
    try:
        with open(path, "rb"):
            return None
    except OSError:
        return "cannot be read"


def check_secret(key: str, path: str, problems: Problems) -> None:
    """A secret file: a regular file of one printable UTF-8 line, at most 4 KiB, read in bounded
    memory; a second line would become a second variable in the container's environment."""
    problem = _file_problem(path)
    if problem is None:
        problem = _secret_text_problem(path)
    if problem:
        problems.error(key, f"{path} {problem}")
    elif Path(path).stat().st_mode & 0o044:
        problems.warn(key, f"{path} is readable by other users: chmod 600 {shlex.quote(path)}")


def _secret_text_problem(path: str) -> str | None:
    try:
        with open(path, "rb") as stream:
            data = stream.read(SECRET_MAX_BYTES + 1)
    except OSError:
        return "cannot be read"
    if len(data) > SECRET_MAX_BYTES:
        return f"is larger than {SECRET_MAX_BYTES // 1024} KiB: a secret file holds one line"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "is not UTF-8 text"
    line = text.removesuffix("\n")
    if "\r" in line:
        return "has Windows line endings (CRLF): save it with LF endings (dos2unix FILE)"
    if not line.strip():
        return "is empty"
    if "\n" in line:
        return "has more than one line: it holds the secret alone, on one line"
    if not line.isprintable():
        return "holds control characters: it holds the secret alone, on one line"
    return None
