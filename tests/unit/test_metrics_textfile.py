"""The node's own series (roles/metrics/textfile.py) as its script writes them, run for real with
stand-ins for `id`, `runuser` and `podman` first on PATH: the data interface at network.mtu, each
serving container's pinned digest (none for a container that is not there or runs a tag), a
file Prometheus' text format accepts (Debian's promtool `check metrics`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from halo_cluster.roles.metrics import textfile
from halo_cluster.roles.metrics.exporter import render
from tests.unit.helpers_promtool import promtool

DIGEST = "sha256:" + "ab" * 32
# what `podman container inspect --format {{.ImageName}} NAME` answers, by name
IMAGES = {"halo-ray": f"docker.io/kyuz0/vllm-therock-gfx1151@{DIGEST}", "halo-vllm": None}


def stand_ins(folder: Path, images: dict[str, str | None]) -> None:
    cases = "".join(
        f'  {name}) echo "{image}" ;;\n' if image else f"  {name}) exit 125 ;;\n"
        for name, image in images.items()
    )
    scripts = {
        "id": "#!/bin/sh\necho 1000\n",
        # runuser -u USER -- COMMAND...: the command, as that user would run it
        "runuser": '#!/bin/sh\nwhile [ "$1" != -- ]; do shift; done\nshift\nexec "$@"\n',
        "podman": f'#!/bin/sh\neval "name=\\${{$#}}"\ncase $name in\n{cases}esac\n',
    }
    for name, text in scripts.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)


def written(tmp_path: Path, images: dict[str, str | None]) -> str:
    bin_, out = tmp_path / "bin", tmp_path / "textfiles"
    bin_.mkdir()
    stand_ins(bin_, images)
    script = tmp_path / "halo-metrics-textfile"
    script.write_text(
        render(
            f"{textfile.UNIT}.sh.j2",
            node="node1",
            folder=str(out),
            user="vllm",
            interface="eth1",
            mtu=9000,
            containers=list(images),
        )
    )
    env = dict(os.environ, PATH=f"{bin_}:{os.environ['PATH']}")
    done = subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert [p.name for p in out.iterdir()] == ["halo-cluster.prom"]  # no temporary left
    return (out / "halo-cluster.prom").read_text()


def test_the_series_name_the_data_link_and_each_pinned_digest(tmp_path: Path) -> None:
    text = written(tmp_path, IMAGES)
    samples = [line for line in text.splitlines() if not line.startswith("#")]
    assert samples == [
        'halo_data_link_mtu_bytes{device="eth1"} 9000',
        f'halo_image_digest_info{{container="halo-ray",digest="{DIGEST}"}} 1',
    ]


def test_a_container_on_a_tag_gives_no_digest(tmp_path: Path) -> None:
    text = written(tmp_path, {"halo-ray": "docker.io/kyuz0/vllm-therock-gfx1151:latest"})
    assert "halo_image_digest_info{" not in text


def test_prometheus_text_format_accepts_them(tmp_path: Path) -> None:
    text = written(tmp_path, IMAGES)
    done = subprocess.run(
        [str(promtool()), "check", "metrics"], input=text, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
