"""The metrics role's rendered files run by the real programs (Debian's node_exporter and
Prometheus, lab/debs.py) on loopback: node_exporter takes the drop-in's command line and serves
the collectors the dashboards read; Prometheus takes the quadlet's arguments, its config and
the web config of `metrics.listen: all`, and answers nothing without the password."""

from __future__ import annotations

import base64
import re
import shlex
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from lab import debs
from lab.sh import LabError
from tests.plan.helpers_metrics import ALL, DROP_IN, UNIT, metrics_plan
from tests.plan.nodes import HOME

FOLDER = f"{HOME}/.config/halo-cluster/metrics/"


def binary(package: str, name: str) -> str:
    try:
        return str(debs.extracted(package) / "usr/bin" / name)
    except (LabError, OSError) as error:
        print(f"{package} not available: {error}")
        pytest.skip(f"{package} not available: {error}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def running(argv: list[str], port: int) -> Iterator[None]:
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert process.poll() is None, process.stderr.read()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        yield
    finally:
        process.terminate()
        process.wait(timeout=20)


def status(url: str, password: str | None = None) -> int:
    request = urllib.request.Request(url)
    if password is not None:
        token = base64.b64encode(f"halo:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def test_node_exporter_runs_the_drop_ins_command(tmp_path: Path) -> None:
    exporter = binary("prometheus-node-exporter", "prometheus-node-exporter")
    drop_in = metrics_plan(ALL, tmp_path).uploads("halo2")[DROP_IN]
    command = shlex.split(re.search(r"^ExecStart=(/.+)$", drop_in, re.M).group(1))
    port = free_port()
    argv = [exporter, *(f"--web.listen-address=127.0.0.1:{port}" if a.startswith(
        "--web.listen-address=") else a for a in command[1:])]  # fmt: skip
    metrics = f"http://127.0.0.1:{port}/metrics"
    with running(argv, port), urllib.request.urlopen(metrics, timeout=10) as answer:
        text = answer.read().decode()
    for name in ("node_memory_MemAvailable_bytes", "node_network_receive_bytes_total",
                 "node_pressure_memory_waiting_seconds_total"):  # fmt: skip
        assert f"\n{name}{{" in text or f"\n{name} " in text, name
    assert 'node_scrape_collector_success{collector="drm"}' in text  # on: no card here


def test_prometheus_takes_the_quadlets_arguments_and_asks_the_password(tmp_path: Path) -> None:
    prometheus = binary("prometheus", "prometheus")
    result = metrics_plan(ALL, tmp_path)
    folder = tmp_path / "etc"
    folder.mkdir()
    for path, text in result.uploads("halo1").items():
        if path.startswith(FOLDER):
            (folder / path.removeprefix(FOLDER)).write_text(
                text.replace("/etc/prometheus/", f"{folder}/")
            )
    exec_line = re.search(r"^Exec=(.+)$", result.uploads("halo1")[UNIT], re.M).group(1)
    port = free_port()
    argv = [prometheus]
    for arg in shlex.split(exec_line):
        arg = arg.replace("/etc/prometheus/", f"{folder}/").replace(
            "=/prometheus", f"={tmp_path / 'series'}"
        )
        argv.append(
            f"--web.listen-address=127.0.0.1:{port}" if arg.startswith("--web.listen") else arg
        )
    with running(argv, port):
        url = f"http://127.0.0.1:{port}/api/v1/query?query=up"
        assert status(url) == 401
        assert status(url, "wrong") == 401
        assert status(url, "prometheus-secret") == 200
