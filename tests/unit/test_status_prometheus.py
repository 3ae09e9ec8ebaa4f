"""`status` live against a real Prometheus (Debian's `prometheus` package of the lab's suite,
lab/debs.py): every query of status/live.py parses and answers on series named as vLLM 0.33.0
exposes them (prometheus_client's text: a counter with `_total`, a histogram's `_bucket{le}`) and
as node_exporter's drm and meminfo collectors do, scraped every second from a local server with
the metrics role's `node` labels; sent by the real curl, read back by `live.read`. With
`metrics.listen: all`'s web config (the role's web.yml, a bcrypt hash), the head's two readers
send the role's header file: status's curl on its stdin, the watchdog's alert query."""

from __future__ import annotations

import http.server
import os
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import bcrypt
import pytest

from halo_cluster.roles.metrics import prometheus as role
from halo_cluster.roles.metrics.model import AUTHORIZATION
from halo_cluster.roles.serve import stallwatch
from halo_cluster.tools.status import live
from lab import debs
from lab.sh import LabError
from tests.unit.helpers_status import LIVE, LIVE_ALL, run_live

GIB = 1 << 30
VLLM = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="org/model"}} 2.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="org/model"}} 1.0
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{{engine="0",model_name="org/model"}} {tokens}
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{engine="0",le="0.1",model_name="org/model"}} {fast}
vllm:time_to_first_token_seconds_bucket{{engine="0",le="0.25",model_name="org/model"}} {all}
vllm:time_to_first_token_seconds_bucket{{engine="0",le="+Inf",model_name="org/model"}} {all}
vllm:time_to_first_token_seconds_count{{engine="0",model_name="org/model"}} {all}
vllm:time_to_first_token_seconds_sum{{engine="0",model_name="org/model"}} {sum}
"""
NODE = """# TYPE node_drm_gpu_busy_percent gauge
node_drm_gpu_busy_percent{{card="card1"}} {busy}
# TYPE node_memory_MemAvailable_bytes gauge
node_memory_MemAvailable_bytes {available}
# TYPE node_drm_memory_gtt_used_bytes gauge
node_drm_memory_gtt_used_bytes{{card="card1"}} {gtt}
"""
SCRAPE = """global: {{scrape_interval: 1s, scrape_timeout: 1s}}
scrape_configs:
  - job_name: vllm
    static_configs: [{{targets: ["127.0.0.1:{port}"], labels: {{node: a}}}}]
  - job_name: node-a
    metrics_path: /node/a
    static_configs: [{{targets: ["127.0.0.1:{port}"], labels: {{node: a}}}}]
  - job_name: node-b
    metrics_path: /node/b
    static_configs: [{{targets: ["127.0.0.1:{port}"], labels: {{node: b}}}}]
"""


class Exporters(http.server.BaseHTTPRequestHandler):
    """vLLM's /metrics, its counters growing by each scrape, and two nodes' node_exporter."""

    scrapes = 0

    def do_GET(self) -> None:
        if self.path == "/metrics":
            Exporters.scrapes += 1
            n = Exporters.scrapes
            body = VLLM.format(tokens=100 * n, fast=n, all=4 * n, sum=0.6 * n)
        else:
            node = self.path.rsplit("/", 1)[-1]
            busy, available = (87, 12 * GIB) if node == "a" else (85, 3 * GIB)
            body = NODE.format(busy=busy, available=available, gtt=80 * GIB)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args) -> None:
        pass


def prometheus_binary() -> Path:
    try:
        return debs.extracted("prometheus") / "usr" / "bin" / "prometheus"
    except (LabError, OSError) as error:
        reason = f"prometheus from Debian's package could not be had: {error}"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


def free_port() -> int:
    with http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler) as server:
        return server.server_address[1]


@contextmanager
def running(tmp_path: Path, *options: str, config: str = "") -> Iterator[int]:
    """Prometheus scraping the exporters, with `options` and `config` added to its own."""
    exporters = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Exporters)
    threading.Thread(target=exporters.serve_forever, daemon=True).start()
    scrape = tmp_path / "prometheus.yml"
    scrape.write_text(SCRAPE.format(port=exporters.server_address[1]) + config)
    port = free_port()
    process = subprocess.Popen(
        [str(prometheus_binary()), f"--config.file={scrape}", f"--storage.tsdb.path={tmp_path}/db",
         f"--web.listen-address=127.0.0.1:{port}", *options],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)
        exporters.shutdown()


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[int]:
    with running(tmp_path) as port:
        yield port


def ready(port: int, header: str = "") -> bool:
    """/-/ready answers 200 (under a web config, with the header: else 401 before it is ready)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/-/ready")
    if header:
        request.add_header(*header.strip().split(": ", 1))
    try:
        with urllib.request.urlopen(request, timeout=1) as answer:
            return answer.status == 200
    except OSError:
        return False


def test_every_query_answers_on_vllms_and_node_exporters_names(prometheus: int) -> None:
    deadline = time.monotonic() + 60
    numbers: dict = {}
    while time.monotonic() < deadline:
        if ready(prometheus):
            numbers = live.read(LIVE, run_live(LIVE, prometheus))
            # rates need two scrapes: the queries run at once, one may see the second before
            # another does
            rated = (
                numbers.get("tokens_per_s"),
                numbers.get("ttft_p50_s"),
                numbers.get("ttft_p95_s"),
            )
            if numbers["state"] == "up" and None not in rated:
                break
        time.sleep(0.5)
    assert numbers["state"] == "up" and numbers["errors"] == [], numbers
    assert (numbers["requests_running"], numbers["requests_waiting"]) == (2.0, 1.0)
    assert numbers["tokens_per_s"] > 0
    assert 0 < numbers["ttft_p50_s"] <= numbers["ttft_p95_s"] <= 0.25  # within the buckets scraped
    assert numbers["nodes"] == {
        "a": {"gpu_busy_percent": 87.0, "memory_available_bytes": 12.0 * GIB,
              "gtt_used_bytes": 80.0 * GIB},
        "b": {"gpu_busy_percent": 85.0, "memory_available_bytes": 3.0 * GIB,
              "gtt_used_bytes": 80.0 * GIB},
    }  # fmt: skip


# the watchdog's settings but where Prometheus is and the header's file (each test's own)
WATCHDOG = stallwatch.Settings(
    url="http://127.0.0.1:1",
    model="m",
    launcher="native",
    ray="halo-ray",
    vllm="halo-vllm",
    workers=[],
    timeout=1,
    interval=1,
    misses=3,
    restarts_per_hour=1,
    secrets="/nonexistent",
    history="/nonexistent",
)
STALLED = """rule_files: [rules.yml]
"""
RULES = f"""groups:
  - name: stalled
    interval: 1s
    rules:
      - alert: {stallwatch.ALERT}
        expr: vector(1)
"""


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """Prometheus with listen: all's web config as the role renders it (password "s3 cr\"et:"),
    an alert always firing under the watchdog's name, and the role's header file in a home."""
    password = b's3 cr"et:'
    web = tmp_path / "web.yml"
    web.write_text(role.render("web.yml.j2", user=role.USER, hashed=bcrypt.hashpw(
        password, bcrypt.gensalt()).decode()))  # fmt: skip
    (tmp_path / "rules.yml").write_text(RULES)
    home = tmp_path / "home"
    header = home / AUTHORIZATION
    header.parent.mkdir(parents=True)
    header.write_text(role.authorization_header(password))
    header.chmod(0o600)
    with running(tmp_path, f"--web.config.file={web}", config=STALLED) as port:
        deadline = time.monotonic() + 60
        while not ready(port, header.read_text()) and time.monotonic() < deadline:
            time.sleep(0.5)
        yield port, home


def test_with_listen_all_status_sends_the_heads_header_and_is_answered(guarded) -> None:
    port, home = guarded
    numbers = live.read(LIVE_ALL, run_live(LIVE_ALL, port, home=str(home)))
    assert numbers["state"] == "up" and numbers["errors"] == [], numbers
    refused = live.read(LIVE, run_live(LIVE, port))  # listen: data's commands: no header
    assert refused["state"] == "down" and "Unauthorized" in refused["reason"], refused


def test_with_listen_all_the_watchdog_reads_the_alert_with_the_heads_header(guarded) -> None:
    port, home = guarded
    url = f"http://127.0.0.1:{port}"
    node = stallwatch.Node(replace(WATCHDOG, alerts=url, authorization=f"{home}/{AUTHORIZATION}"))
    deadline = time.monotonic() + 60
    while not node.alert() and time.monotonic() < deadline:  # the rule's first evaluation
        time.sleep(0.5)
    assert node.alert()
    assert not stallwatch.Node(replace(WATCHDOG, alerts=url)).alert()  # no header: refused
    query = f"{url}/api/v1/query?query=up"
    assert stallwatch.Node(replace(WATCHDOG, alerts=url)).get(query, 5)[0] == 401
