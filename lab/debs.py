"""Debian packages' files for the lab: real Prometheus, promtool and node_exporter, as the lab's
nodes' suite (lab.places.SUITE) ships them.

`apt-get download` fetches one package (no dependencies: the lab takes Go binaries, which need
none) from the mirror this machine already uses, through an apt state of the lab's own under the
lab's cache, so the machine's own apt (another Debian release, perhaps) is neither read nor
changed; `dpkg-deb -x` extracts it. Built once per package and cached; a fresh machine builds the
same from these lines.
"""

from __future__ import annotations

import fcntl
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lab import sh
from lab.places import CACHE, SUITE, apt_mirror

DEBS = CACHE / f"debs-{SUITE}"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


def extracted(package: str) -> Path:
    """The root of `package`'s files (`ROOT/usr/bin/...`), downloaded and extracted once."""
    root = DEBS / "root" / package
    if (root / ".complete").exists():
        return root
    with _locked():
        if (root / ".complete").exists():
            return root
        deb = _download(package)
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        sh.run("dpkg-deb", "-x", str(deb), str(root))
        (root / ".version").write_text(deb.name.split("_")[1] + "\n")
        (root / ".complete").touch()
    return root


def version(package: str) -> str:
    """The Debian version of the package `extracted` gave (`2.53.3+ds1-2`)."""
    return (extracted(package) / ".version").read_text().strip()


@contextmanager
def _locked() -> Iterator[None]:
    # two lab builds (or two sessions' tests) may ask at once; apt's own lock is off (its state
    # is ours), so this one stands for it
    DEBS.mkdir(parents=True, exist_ok=True)
    with open(DEBS / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _download(package: str) -> Path:
    folder = DEBS / "deb" / package
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    if not (DEBS / "state" / ".updated").exists():
        _apt("update")
        (DEBS / "state" / ".updated").touch()
    result = _apt("download", package, cwd=folder, check=False)
    if result.returncode != 0:
        # the mirror moved on since the lists were read: read them again, once
        _apt("update")
        _apt("download", package, cwd=folder)
    debs = sorted(folder.glob(f"{package}_*.deb"))
    if len(debs) != 1:
        raise sh.LabError(f"apt-get download {package}: found {len(debs)} .deb files in {folder}")
    return debs[0]


def _apt(*args: str, cwd: Path | None = None, check: bool = True):
    etc = DEBS / "etc"
    (etc / "sources.list.d").mkdir(parents=True, exist_ok=True)
    (etc / "preferences.d").mkdir(exist_ok=True)
    (etc / "sources.list").write_text(f"deb [signed-by={KEYRING}] {apt_mirror()} {SUITE} main\n")
    (DEBS / "state" / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (DEBS / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    status = DEBS / "state" / "status"
    status.touch()
    options = {
        "Dir::Etc::SourceList": str(etc / "sources.list"),
        "Dir::Etc::SourceParts": str(etc / "sources.list.d"),
        "Dir::Etc::Preferences": str(etc / "preferences"),
        "Dir::Etc::PreferencesParts": str(etc / "preferences.d"),
        "Dir::State": str(DEBS / "state"),
        "Dir::State::status": str(status),
        "Dir::Cache": str(DEBS / "cache"),
        "Debug::NoLocking": "1",
        "APT::Sandbox::User": "root",
    }
    argv = ["apt-get", "--quiet", "--quiet"]
    for key, value in options.items():
        argv += ["-o", f"{key}={value}"]
    return sh.run(*argv, *args, check=check, cwd=cwd)
