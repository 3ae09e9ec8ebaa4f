"""The lab's container image: a small Debian root that toolbox accepts, with real Ray and the real
huggingface_hub CLI (`hf`) in /opt/ray, the lab-only stand-in `vllm`, and a profile.d file as the
real image has. Built once per recipe (this file, lab/standin/, lab/image/) and cached.

The lab seeds its registry with it under the upstream image's name (see lab.registry.seed).
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

from lab import sh
from lab.places import CACHE, SUITE, apt_mirror, folder_digest

PACKAGES = ("sudo", "libcap2-bin", "passwd", "bash", "python3", "python3-venv", "procps")
# Real Ray and huggingface_hub in the lab image, from PyPI; huggingface_hub 1.x is what current
# vLLM requires (its `hf` CLI replaced `huggingface-cli`)
WHEELS = ("ray==2.60.0", "huggingface_hub==1.33.0")  # lab/hubserver.py follows 1.33.0
# the stand-in's own dist-info, so that the image reports its vLLM version as a real one does
# (importlib.metadata, read by the deploy without importing vllm); `publish-image` rewrites it
STANDIN_VERSION = "0.33.0"
# what `publish-image --broken|--slow` builds into the image's environment, HALO_STANDIN_FAULT,
# which the stand-in reads: a build that never serves, or one slower per token
FAULT_ENV = "HALO_STANDIN_FAULT"
FAULTS = ("none", "broken", "slow")
PYTHON = "3.13"  # trixie's python3
DIST_INFO = f"/opt/ray/lib/python{PYTHON}/site-packages/vllm-{STANDIN_VERSION}.dist-info"
HERE = Path(__file__).resolve().parent
STANDIN = HERE / "standin"
FILES = HERE / "image"


def image_hash() -> str:
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for folder in (STANDIN, FILES):
        folder_digest(digest, folder)
    return digest.hexdigest()[:12]


def ensure_image() -> Path:
    """A folder with image.tar (an older recipe's image goes)."""
    folder = CACHE / f"image-{image_hash()}"
    for stale in CACHE.glob("image-*"):
        if stale != folder:
            shutil.rmtree(stale, ignore_errors=True)
    if not (folder / "image.tar").exists():
        folder.mkdir(parents=True, exist_ok=True)
        wheels = wheelhouse()
        partial = folder / "image.tar.partial"
        clean = 'env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin chroot "$1"'
        requirements = " ".join(f"'{w}'" for w in WHEELS)
        sh.run(
            "mmdebstrap",
            "--quiet",
            "--variant=minbase",
            f"--include={','.join(PACKAGES)}",
            f"--customize-hook=copy-in {wheels} /tmp",
            f"--customize-hook={clean} python3 -m venv /opt/ray",
            f"--customize-hook={clean} /opt/ray/bin/pip install --quiet --no-index "
            f"--find-links /tmp/{wheels.name} {requirements}",
            f'--customize-hook=rm -rf "$1/tmp/{wheels.name}"',
            '--customize-hook=ln -s /opt/ray/bin/ray "$1/usr/local/bin/ray"',
            '--customize-hook=ln -s /opt/ray/bin/hf "$1/usr/local/bin/hf"',
            f"--customize-hook=copy-in {STANDIN / 'vllm'} /usr/local/bin",
            # its modules beside the script, where its imports find them (sys.path[0])
            *(f"--customize-hook=copy-in {m} /usr/local/bin" for m in sorted(STANDIN.glob("*.py"))),
            '--customize-hook=chmod 755 "$1/usr/local/bin/vllm"',
            f'--customize-hook=mkdir -p "$1{DIST_INFO}" && printf '
            f"'Metadata-Version: 2.1\\nName: vllm\\nVersion: {STANDIN_VERSION}\\n' "
            f'> "$1{DIST_INFO}/METADATA"',
            f"--customize-hook=copy-in {FILES / 'halo-lab-profile.sh'} /etc/profile.d",
            "--format=tar",
            SUITE,
            str(partial),
            apt_mirror(),
        )
        partial.rename(folder / "image.tar")
    return folder


def wheelhouse() -> Path:
    """Ray, huggingface_hub and what they need, for the image's Python, downloaded once from
    PyPI by this machine's pip (with its own index settings) and kept beside the other caches."""
    key = hashlib.sha256(" ".join(WHEELS).encode()).hexdigest()[:8]
    wheels = CACHE / f"wheels-{key}-cp{PYTHON.replace('.', '')}"
    if not (wheels / ".complete").exists():
        platforms = ("manylinux2014", "manylinux_2_17", "manylinux_2_28", "manylinux_2_34")
        sh.run(
            sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(wheels),
            "--only-binary=:all:", "--implementation", "cp", "--python-version", PYTHON,
            *(f"--platform={p}_x86_64" for p in platforms),
            *WHEELS,
        )  # fmt: skip
        (wheels / ".complete").touch()
    return wheels
