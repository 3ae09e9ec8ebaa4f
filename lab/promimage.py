"""The lab's Prometheus image: Debian's real Prometheus and promtool (lab/debs.py) with the C
library they link, laid out as the upstream image is (`/bin/prometheus`, `/bin/promtool`, the
`/prometheus` work folder, `USER nobody`, its CMD), published to the lab's registry under the
real image's name (the metrics role's default `metrics.image`), so the deploy resolves, pulls
and runs it unchanged. Built once per recipe and kept in the image folder every node mounts.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

from halo_cluster.roles.metrics.schema import DEFAULT_IMAGE
from lab import debs

# what the upstream Dockerfile says, for `podman import --change`
CHANGES = (
    'ENTRYPOINT ["/bin/prometheus"]',
    'CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]',
    "USER nobody",
    "WORKDIR /prometheus",
    "EXPOSE 9090",
)
# the lab registry's name for it: the real one's path and tag on the lab's registry
LAB_NAME = "127.0.0.1:5000/" + DEFAULT_IMAGE.split("/", 1)[1]
LIBC = ("usr/lib/x86_64-linux-gnu/libc.so.6", "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
PASSWD = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n"
GROUP = "root:x:0:\nnobody:x:65534:\n"
DEFAULT_CONFIG = "global:\n  scrape_interval: 15s\n"


def key() -> str:
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for package in ("prometheus", "promtool", "libc6"):
        digest.update(debs.version(package).encode())
    return digest.hexdigest()[:12]


def ensure(folder: Path) -> Path:
    """`folder/prometheus-KEY.tar` (the image's root as a tar for `podman import`)."""
    target = folder / f"prometheus-{key()}.tar"
    if target.exists():
        return target
    for stale in folder.glob("prometheus-*.tar"):
        stale.unlink()
    partial = target.with_suffix(".partial")
    with tarfile.open(partial, "w") as tar:
        for path, source in (
            ("bin/prometheus", debs.extracted("prometheus") / "usr/bin/prometheus"),
            ("bin/promtool", debs.extracted("promtool") / "usr/bin/promtool"),
            *((lib, debs.extracted("libc6") / lib) for lib in LIBC),
        ):
            tar.add(source, arcname=path)
        _folder(tar, "lib64")
        link = tarfile.TarInfo("lib64/ld-linux-x86-64.so.2")
        link.type, link.linkname = tarfile.SYMTYPE, "/" + LIBC[1]
        tar.addfile(link)
        _text(tar, "etc/passwd", PASSWD)
        _text(tar, "etc/group", GROUP)
        _text(tar, "etc/prometheus/prometheus.yml", DEFAULT_CONFIG)
        _folder(tar, "prometheus", uid=65534)
        _folder(tar, "tmp", mode=0o1777)
    partial.rename(target)
    return target


def seed_script(tar: str) -> str:
    """The shell lines a node runs to publish the image from `tar` (its path on the node)."""
    changes = " ".join(f"--change '{change}'" for change in CHANGES)
    return f"""
set -eu
podman import --quiet {changes} {tar} {LAB_NAME} >/dev/null
podman push --quiet --tls-verify=false {LAB_NAME} >/dev/null
podman rmi --force {LAB_NAME} >/dev/null
"""


def _text(tar: tarfile.TarFile, path: str, text: str) -> None:
    info = tarfile.TarInfo(path)
    data = text.encode()
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


def _folder(tar: tarfile.TarFile, path: str, uid: int = 0, mode: int = 0o755) -> None:
    info = tarfile.TarInfo(path)
    info.type, info.mode, info.uid, info.gid = tarfile.DIRTYPE, mode, uid, uid
    tar.addfile(info)
