"""The lab's real metrics software (lab/debs.py): node-exporter as the lab's repository ships it
(Debian's binary in the layout of Fedora's node-exporter.spec) and the Prometheus image's root
(Debian's Prometheus and promtool with their C library, the upstream image's paths), built
from the project's own files as a fresh machine builds them."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from lab import debs, promimage, releases, rpms
from lab.sh import LabError


@pytest.fixture(scope="module", autouse=True)
def fetched() -> None:
    try:
        for package in ("prometheus-node-exporter", "prometheus", "promtool", "libc6"):
            debs.extracted(package)
    except (LabError, OSError) as error:
        print(f"Debian's packages could not be fetched: {error}")
        pytest.skip(f"Debian's packages could not be fetched: {error}")


def test_node_exporter_has_fedoras_names_and_layout(tmp_path: Path) -> None:
    spec = tmp_path / "node-exporter.spec"
    spec.write_text(rpms.specs(releases.DEFAULT)[rpms.EXPORTER])
    subprocess.run(
        ["rpmbuild", "-bb", "--quiet", "--define", f"_topdir {tmp_path / 'build'}",
         "--define", f"_rpmdir {tmp_path / 'rpms'}", str(spec)],
        check=True, capture_output=True,
    )  # fmt: skip
    (rpm,) = (tmp_path / "rpms").rglob("node-exporter-*.rpm")
    listed = subprocess.run(["rpm", "-qlp", str(rpm)], capture_output=True, text=True).stdout
    for path in (
        "/usr/bin/prometheus-node-exporter",
        "/usr/bin/node_exporter",
        "/usr/lib/systemd/system/prometheus-node-exporter.service",
        "/usr/lib/systemd/system/node_exporter.service",
        "/etc/default/prometheus-node-exporter",
        "/usr/lib/sysusers.d/node-exporter.conf",
    ):
        assert path in listed.splitlines(), listed
    scripts = subprocess.run(["rpm", "-qp", "--scripts", str(rpm)], capture_output=True, text=True)
    assert "systemd-sysusers" in scripts.stdout  # the unit's User=prometheus exists
    binary = debs.extracted("prometheus-node-exporter") / "usr/bin/prometheus-node-exporter"
    shown = subprocess.run([str(binary), "--help"], capture_output=True, text=True)
    help_text = shown.stdout + shown.stderr
    for flag in ("--collector.drm", "--collector.textfile.directory", "--web.listen-address"):
        assert flag in help_text


@pytest.mark.skipif(os.geteuid() != 0, reason="chroot needs root")
def test_the_prometheus_image_runs_debians_prometheus_in_the_upstream_layout(
    tmp_path: Path,
) -> None:
    tar = promimage.ensure(tmp_path)
    root = tmp_path / "root"
    with tarfile.open(tar) as image:
        image.extractall(root, filter="tar")
        owner = image.getmember("prometheus").uid
    assert owner == 65534  # `nobody` writes its series there
    for binary in ("/bin/prometheus", "/bin/promtool"):
        done = subprocess.run(["chroot", str(root), binary, "--version"], capture_output=True,
                              text=True)  # fmt: skip
        assert done.returncode == 0 and "version 2." in done.stdout + done.stderr, done
    assert promimage.LAB_NAME.endswith("/prometheus/prometheus:v3.5.0")
