"""The lab's RPM signing key: the nodes of a release that enforces signatures (Fedora 45) trust
it as a Fedora node trusts Fedora's key, and refuse what it did not sign.

One key for every build, kept in the cache (not in a recipe's folder), so that a rebuilt
repository and an older root filesystem still agree on it. It signs stand-ins in a lab on one
machine and guards nothing else: no passphrase.
"""

from __future__ import annotations

from pathlib import Path

from lab import sh
from lab.places import CACHE

HOME = CACHE / "signing"  # gpg's home folder
NAME = "halo-cluster lab <lab@halo-cluster.invalid>"
KEY_FILE = "RPM-GPG-KEY-halo-lab"
GPG = "/usr/bin/gpg"  # the public key, beside the RPMs in the repository


def gpg(*args: str) -> tuple[str, ...]:
    return ("gpg", "--batch", "--quiet", "--homedir", str(HOME), *args)


def ensure_key() -> None:
    """Make the key once."""
    if sh.run(*gpg("--list-secret-keys", NAME), check=False).returncode == 0:
        return
    HOME.mkdir(parents=True, exist_ok=True, mode=0o700)
    sh.run(*gpg("--passphrase", "", "--quick-gen-key", NAME, "rsa3072", "sign", "never"))


def sign(rpms: list[Path]) -> None:
    """Sign each of `rpms` in place."""
    ensure_key()
    sh.run(
        "rpmsign",
        "--addsign",
        "--define",
        f"__gpg {GPG}",  # Debian's rpm names gpg2, which Debian does not install
        "--define",
        f"_gpg_name {NAME}",
        "--define",
        f"_gpg_path {HOME}",
        *map(str, rpms),
        input="",  # nothing to ask: the key has no passphrase
    )


def export_key(path: Path) -> None:
    """Write the public key (ASCII armour) to `path`."""
    ensure_key()
    path.write_text(sh.run(*gpg("--armor", "--export", NAME)).stdout)
