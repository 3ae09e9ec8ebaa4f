"""The node's own series (roles/metrics/textfile.py, declared in textseries.py) as its script
writes them, run for real with stand-ins for `id`, `runuser`, `podman`, `systemctl` and `pgrep`
first on PATH: the data interface at network.mtu, each serving container's pinned digest (none
for a container that is not there or runs a tag), each serving service the node runs (its
quadlet is there) active or not with its unit's NRestarts, Ray active only with its raylet; a
file Prometheus' text format accepts (Debian's promtool `check metrics`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from halo_cluster.roles.metrics import textfile, textseries
from halo_cluster.roles.metrics.exporter import render
from tests.unit.helpers_promtool import promtool

DIGEST = "sha256:" + "ab" * 32
# what `podman container inspect --format {{.ImageName}} NAME` answers, by name
IMAGES = {"halo-ray": f"docker.io/kyuz0/vllm-therock-gfx1151@{DIGEST}", "halo-vllm": None}
# what `systemctl --user show -p ActiveState,NRestarts NAME.service` answers, in systemd's own
# order (a Service property before a Unit property), by the service whose quadlet is there
HEAD = {
    "halo-ray": "NRestarts=0\nActiveState=active",
    "halo-vllm": "NRestarts=2\nActiveState=active",
}


def stand_ins(
    folder: Path, images: dict[str, str | None], units: dict[str, str] | None, raylet: bool
) -> None:
    cases = "".join(
        f'  {name}) echo "{image}" ;;\n' if image else f"  {name}) exit 125 ;;\n"
        for name, image in images.items()
    )
    shows = "".join(
        f"  {name}.service) printf '%s\\n' '{text}' ;;\n" for name, text in (units or {}).items()
    )
    scripts = {
        "id": "#!/bin/sh\necho 1000\n",
        # runuser -u USER -- COMMAND...: the command, as that user would run it
        "runuser": '#!/bin/sh\nwhile [ "$1" != -- ]; do shift; done\nshift\nexec "$@"\n',
        "podman": f'#!/bin/sh\neval "name=\\${{$#}}"\ncase $name in\n{cases}esac\n',
        # None: the user's manager does not answer (systemctl's "Failed to connect to bus")
        "systemctl": f'#!/bin/sh\neval "name=\\${{$#}}"\ncase $name in\n{shows}esac\n'
        if units is not None
        else "#!/bin/sh\necho 'Failed to connect to bus' >&2\nexit 1\n",
        # pgrep -u vllm -f raylet/raylet: found or not
        "pgrep": f"#!/bin/sh\n{'echo 4242' if raylet else 'exit 1'}\n",
    }
    for name, text in scripts.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)


def written(
    tmp_path: Path,
    images: dict[str, str | None],
    units: dict[str, str] | None = None,
    quadlets: tuple[str, ...] = (),
    raylet: bool = True,
) -> str:
    bin_, out, home = tmp_path / "bin", tmp_path / "textfiles", tmp_path / "quadlets"
    bin_.mkdir()
    home.mkdir()
    for name in quadlets:
        (home / f"{name}.container").write_text("[Container]\n")
    stand_ins(bin_, images, units, raylet)
    script = tmp_path / "halo-metrics-textfile"
    script.write_text(
        render(
            f"{textfile.UNIT}.sh.j2",
            node="node1",
            folder=str(out),
            user="vllm",
            quadlets=str(home),
            interface="eth1",
            mtu=9000,
            containers=list(images),
            ray=textfile.RAY,
            series=textseries.SERIES,
            file=textseries.FILE,
        )
    )
    env = dict(os.environ, PATH=f"{bin_}:{os.environ['PATH']}")
    done = subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert [p.name for p in out.iterdir()] == [textseries.FILE]  # no temporary left
    return (out / textseries.FILE).read_text()


def samples(text: str, prefix: str = "") -> list[str]:
    return [line for line in text.splitlines() if line.startswith(prefix or ("h", "n"))]


def test_the_series_name_the_data_link_each_pinned_digest_and_the_services(
    tmp_path: Path,
) -> None:
    text = written(tmp_path, IMAGES, HEAD, quadlets=("halo-ray", "halo-vllm"))
    assert samples(text) == [
        'halo_data_link_mtu_bytes{device="eth1"} 9000',
        f'halo_image_digest_info{{container="halo-ray",digest="{DIGEST}"}} 1',
        'halo_service_active{service="halo-ray"} 1',
        'halo_service_active{service="halo-vllm"} 1',
        'halo_service_restarts_total{service="halo-ray"} 0',
        'halo_service_restarts_total{service="halo-vllm"} 2',
    ]
    # each series declared once, with its HELP and TYPE lines
    for series in textseries.SERIES.values():
        assert f"# TYPE {series.name} {series.kind}" in text.splitlines()
        assert f"# HELP {series.name} {series.help}" in text.splitlines()


def test_a_container_on_a_tag_gives_no_digest(tmp_path: Path) -> None:
    text = written(tmp_path, {"halo-ray": "docker.io/kyuz0/vllm-therock-gfx1151:latest"})
    assert "halo_image_digest_info{" not in text


def test_ray_active_without_its_raylet_is_not_up(tmp_path: Path) -> None:
    # ray-start.sh waits for the head with its unit already active
    text = written(tmp_path, IMAGES, HEAD, quadlets=("halo-ray",), raylet=False)
    assert samples(text, "halo_service_") == [
        'halo_service_active{service="halo-ray"} 0',
        'halo_service_restarts_total{service="halo-ray"} 0',
    ]


def test_a_unit_activating_or_failed_is_not_active(tmp_path: Path) -> None:
    units = {
        "halo-ray": "NRestarts=0\nActiveState=activating",
        "halo-vllm": "NRestarts=7\nActiveState=failed",
    }
    text = written(tmp_path, IMAGES, units, quadlets=("halo-ray", "halo-vllm"))
    assert samples(text, "halo_service_active") == [
        'halo_service_active{service="halo-ray"} 0',
        'halo_service_active{service="halo-vllm"} 0',
    ]
    assert 'halo_service_restarts_total{service="halo-vllm"} 7' in text


def test_a_service_the_node_does_not_run_has_no_series(tmp_path: Path) -> None:
    # serve.launcher: native: every node's rank is its halo-vllm, there is no halo-ray quadlet
    text = written(tmp_path, IMAGES, HEAD, quadlets=("halo-vllm",))
    assert samples(text, "halo_service_") == [
        'halo_service_active{service="halo-vllm"} 1',
        'halo_service_restarts_total{service="halo-vllm"} 2',
    ]


def test_the_users_manager_not_answering_is_down_and_counts_nothing(tmp_path: Path) -> None:
    text = written(tmp_path, IMAGES, None, quadlets=("halo-ray", "halo-vllm"))
    assert samples(text, "halo_service_") == [
        'halo_service_active{service="halo-ray"} 0',
        'halo_service_active{service="halo-vllm"} 0',
    ]


def test_prometheus_text_format_accepts_them(tmp_path: Path) -> None:
    text = written(tmp_path, IMAGES, HEAD, quadlets=("halo-ray", "halo-vllm"))
    done = subprocess.run(
        [str(promtool()), "check", "metrics"], input=text, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
