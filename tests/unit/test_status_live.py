"""`status` live (halo_cluster/tools/status/live.py): Prometheus' answers in the HTTP API's own
JSON shape, as prometheus/prometheus docs/querying/api.md (@d15adb9, "Format overview",
"Instant queries", "Expression query result formats") documents them: the envelope
`{"status", "data": {"resultType", "result"}}`, each sample `[<unix_time>, "<sample_value>"]`
with its value a string ("NaN" quoted), and `{"status": "error", "errorType", "error"}`; the
queries sent by the real curl to a local HTTP server, and to a port nothing listens on."""

from __future__ import annotations

import http.server
import json
import threading
import urllib.parse
from collections.abc import Iterator
from typing import ClassVar

import pytest

from halo_cluster.node import batch
from halo_cluster.roles.metrics.model import AUTHORIZATION
from halo_cluster.tools.status import live, read, view
from tests.unit.helpers_bench import fake_ssh
from tests.unit.helpers_status import CLUSTER, LIVE, LIVE_ALL, run_live

# argv: -F CONFIG ALIAS sh -s (or -O exit ALIAS): each node answers its read from a file by its
# name (the alias is halo-NAME)
ANSWER_BY_ALIAS = """
if [ "$3" = -O ]; then exit 0; fi
cat >/dev/null; cat "$ANSWERS/${3#halo-}"
"""
T = 1764687600.781  # a unix time, as the API writes it (seconds, a fraction)


def vector(*samples: tuple[dict, str]) -> dict:
    """An instant query's answer: a vector of (labels, value as a string)."""
    result = [{"metric": labels, "value": [T, value]} for labels, value in samples]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def per_node(a: str, b: str) -> dict:
    """A `by (node, instance)` answer: node_exporter's targets on the nodes' data addresses, each
    with the `node` label the metrics role's scrape config gives it."""
    return vector(
        ({"instance": "192.168.100.1:9100", "node": "a"}, a),
        ({"instance": "192.168.100.2:9100", "node": "b"}, b),
    )


ANSWERS = {
    "requests_running": vector(({}, "3")),
    "requests_waiting": vector(({}, "1")),
    "tokens_per_s": vector(({}, "41.25")),
    "ttft_p50_s": vector(({}, "0.21")),
    "ttft_p95_s": vector(({}, "0.8")),
    "gpu_busy_percent": per_node("87", "85"),
    "memory_available_bytes": per_node(str(12 << 30), "0"),
    "gtt_used_bytes": per_node(str(80 << 30), str(79 << 30)),
}


def parts(answers: dict[str, dict | str], status_: int = 0, err: str = "") -> dict:
    """The head's read of the live queries, as the batch format gives it back."""
    found = {}
    for name in live.QUERIES:
        body = answers.get(name, "")
        text = body if isinstance(body, str) else json.dumps(body)
        found[live.PREFIX + name] = batch.Part(status_, text.encode(), err.encode())
    return found


def test_each_query_is_a_bounded_curl_on_the_head_to_its_data_address() -> None:
    commands = live.commands(LIVE)
    assert list(commands) == [live.PREFIX + name for name in live.QUERIES]
    for command in commands.values():
        assert command.startswith(f"curl -sS -m {live.CURL_SECONDS} -G --data-urlencode")
        assert command.endswith("http://192.168.100.1:9090/api/v1/query")
    head = read.gather_commands(LIVE, LIVE.head)
    assert set(commands) <= set(head) and not set(commands) & set(
        read.gather_commands(LIVE, LIVE.workers[0])
    )
    assert live.commands(CLUSTER) == {}  # metrics off: no query


def test_with_listen_all_each_query_reads_the_header_on_its_stdin_from_the_heads_file() -> None:
    """The metrics role's 0600 file (roles/metrics/model.py's path, written there only with
    listen: all: tests/plan/test_metrics.py), a redirection of the shell: in no argv, no `-u`."""
    for command in live.commands(LIVE_ALL).values():
        assert " -H @- http://192.168.100.1:9090/api/v1/query" in command
        assert command.endswith(f" < ~vllm/{AUTHORIZATION}") and " -u" not in command
    for command in live.commands(LIVE).values():  # listen: data: nothing asked, none sent
        assert "-H" not in command and "<" not in command and " -u" not in command


def test_the_numbers_and_each_nodes_by_its_instance() -> None:
    numbers = live.read(LIVE, parts(ANSWERS))
    assert numbers["state"] == live.UP and numbers["errors"] == []
    assert (numbers["requests_running"], numbers["requests_waiting"]) == (3.0, 1.0)
    assert (numbers["tokens_per_s"], numbers["ttft_p50_s"], numbers["ttft_p95_s"]) == (
        41.25,
        0.21,
        0.8,
    )
    assert numbers["nodes"]["a"] == {
        "gpu_busy_percent": 87.0,
        "memory_available_bytes": float(12 << 30),
        "gtt_used_bytes": float(80 << 30),
    }
    said = live.lines(numbers)
    assert said[0] == (
        "live (Prometheus http://192.168.100.1:9090, last 5m): requests 3 running, 1 waiting; "
        "41.2 tokens/s; time to first token p50 0.21 s, p95 0.80 s"
    )
    assert said[1:] == [
        "  a: GPU busy 87 %, memory available 12.0 GiB, GTT used 80.0 GiB",
        "  b: GPU busy 85 %, memory available 0.0 GiB, GTT used 79.0 GiB",
    ]


def test_empty_results_and_nan_are_no_data_never_zero() -> None:
    """No request in the window: the quantile of no observations is NaN; no drm device (the
    lab's nodes): the GPU queries return an empty vector."""
    answers = ANSWERS | {
        "ttft_p50_s": vector(({}, "NaN")),
        "ttft_p95_s": vector(({}, "NaN")),
        "tokens_per_s": vector(),
        "gpu_busy_percent": vector(),
        "gtt_used_bytes": vector(({"instance": "192.168.100.2:9100"}, "NaN")),
    }
    numbers = live.read(LIVE, parts(answers))
    assert (numbers["tokens_per_s"], numbers["ttft_p50_s"], numbers["ttft_p95_s"]) == (
        None,
        None,
        None,
    )
    assert numbers["nodes"]["b"]["gpu_busy_percent"] is None
    assert numbers["nodes"]["b"]["gtt_used_bytes"] is None
    said = live.lines(numbers)
    assert "no data tokens/s" not in said[0] and "no data; time to first token" in said[0]
    assert said[2] == "  b: GPU busy no data, memory available 0.0 GiB, GTT used no data"
    assert json.loads(json.dumps(numbers))["ttft_p50_s"] is None  # --json: null, not NaN


def test_without_a_node_label_the_instance_names_the_node() -> None:
    """A target labelled otherwise: its address (without the port) is a node's data address or
    SSH host; a series of no node is left out."""
    answers = ANSWERS | {
        "gpu_busy_percent": vector(
            ({"instance": "192.168.100.2:9100"}, "40"), ({"instance": "10.9.9.9:9100"}, "50")
        ),
        "gtt_used_bytes": vector(({"instance": "h1:9100", "node": "elsewhere"}, "1")),
    }
    numbers = live.read(LIVE, parts(answers))
    assert [n["gpu_busy_percent"] for n in numbers["nodes"].values()] == [None, 40.0]
    assert numbers["nodes"]["a"]["gtt_used_bytes"] == 1.0


def test_prometheus_down_is_one_line() -> None:
    refused = "curl: (7) Failed to connect to 192.168.100.1 port 9090 after 0 ms: Couldn't connect"
    numbers = live.read(LIVE, parts({}, status_=7, err=refused + "\n"))
    assert numbers == {
        "state": "down",
        "prometheus": "http://192.168.100.1:9090",
        "reason": refused,
    }
    assert live.lines(numbers) == [
        f"live: Prometheus at http://192.168.100.1:9090 did not answer ({refused}): "
        "the table is this moment only"
    ]


def test_an_error_envelope_is_said_the_other_queries_are_read() -> None:
    error = {"status": "error", "errorType": "bad_data", "error": "1:5: parse error"}
    numbers = live.read(LIVE, parts(ANSWERS | {"ttft_p95_s": error}))
    assert (
        numbers["state"] == "up"
        and numbers["ttft_p95_s"] is None
        and numbers["tokens_per_s"] == 41.25
    )
    assert numbers["errors"] == ["ttft_p95_s: bad_data: 1:5: parse error"]
    assert live.lines(numbers)[-1] == "  live: query ttft_p95_s: bad_data: 1:5: parse error"
    garbled = live.read(LIVE, parts(ANSWERS | {"requests_running": "<html>"}))
    assert garbled["errors"] == ["requests_running: not Prometheus' JSON: '<html>'"]


def test_metrics_off_and_a_head_not_read() -> None:
    assert live.read(CLUSTER, {})["state"] == live.OFF
    assert live.lines({"state": "off"})[0].startswith("live: metrics.enabled is false")
    assert live.lines({}) == ["live: not read (the head was not read)"]


class Prometheus(http.server.BaseHTTPRequestHandler):
    """A stand-in for Prometheus' /api/v1/query: answers from ANSWERS by the query sent."""

    asked: ClassVar[list[dict]] = []

    def do_GET(self) -> None:
        url = urllib.parse.urlparse(self.path)
        query = urllib.parse.parse_qs(url.query)
        found = {"path": url.path, "authorization": self.headers.get("Authorization")}
        Prometheus.asked.append(found | {k: v[0] for k, v in query.items()})
        name = next(n for n, q in live.QUERIES.items() if q == query["query"][0])
        body = json.dumps(ANSWERS[name]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def prometheus() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Prometheus)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def test_the_real_curl_sends_each_query_url_encoded(prometheus: int) -> None:
    Prometheus.asked.clear()
    numbers = live.read(LIVE, run_live(LIVE, prometheus))
    assert numbers["state"] == "up" and numbers["tokens_per_s"] == 41.25 and numbers["errors"] == []
    assert sorted(a["query"] for a in Prometheus.asked) == sorted(live.QUERIES.values())
    assert {(a["path"], a["timeout"]) for a in Prometheus.asked} == {("/api/v1/query", "4s")}
    assert {a["authorization"] for a in Prometheus.asked} == {None}  # listen: data: none sent


def test_the_real_curl_sends_the_header_from_the_heads_file(prometheus: int, tmp_path) -> None:
    header = tmp_path / AUTHORIZATION
    header.parent.mkdir(parents=True)
    header.write_text("Authorization: Basic aGFsbzpzM2NyZXQ=\n")
    header.chmod(0o600)
    Prometheus.asked.clear()
    numbers = live.read(LIVE_ALL, run_live(LIVE_ALL, prometheus, home=str(tmp_path)))
    assert numbers["state"] == "up" and numbers["errors"] == []
    assert len(Prometheus.asked) == len(live.QUERIES)
    assert {a["authorization"] for a in Prometheus.asked} == {"Basic aGFsbzpzM2NyZXQ="}
    header.unlink()  # no file (a deploy not yet run): the shell says so, the query is not sent
    gone = live.read(LIVE_ALL, run_live(LIVE_ALL, prometheus, home=str(tmp_path)))
    assert gone["state"] == "down" and "No such file" in gone["reason"]


def test_the_real_curl_to_a_port_nothing_listens_on_is_down() -> None:
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Prometheus) as closed:
        port = closed.server_address[1]  # bound, then closed: nothing listens
    numbers = live.read(LIVE, run_live(LIVE, port))
    assert numbers["state"] == "down" and numbers["reason"].startswith("curl: (7)")


def test_status_shows_the_live_lines_after_the_table() -> None:
    head = read.NodeStatus("a", "head", "192.168.100.1")
    head.live = live.read(LIVE, parts(ANSWERS))
    worker = read.NodeStatus("b", "worker", "192.168.100.2")
    assert view.live_table([head, worker]).startswith("live (Prometheus http://")
    gone = read.NodeStatus("a", "head", "192.168.100.1", reachable=False)
    assert view.live_table([gone, worker]) == ""
    assert read.as_json(gone)["live"] is None  # not read
    assert read.as_json(head)["live"]["nodes"]["b"]["gpu_busy_percent"] == 85.0


def test_collect_reads_the_live_numbers_in_the_heads_one_read(tmp_path, monkeypatch) -> None:
    """Through the transport: the head's one batched read answers status's commands and the
    live queries (Prometheus' JSON), the worker its own; the head's status holds the numbers."""
    answers = {live.PREFIX + name: json.dumps(body) for name, body in ANSWERS.items()}
    for node in LIVE.nodes:
        names = read.gather_commands(LIVE, node)
        printed = batch.joined(batch.Part(0, answers.get(n, "").encode()) for n in names)
        (tmp_path / node.name).write_bytes(printed)
    fake_ssh(tmp_path, monkeypatch, ANSWER_BY_ALIAS)
    monkeypatch.setenv("PATH", f"{tmp_path / 'fakebin'}:/usr/bin:/bin")
    monkeypatch.setenv("ANSWERS", str(tmp_path))
    head, worker = read.collect(LIVE)
    assert head.live["state"] == "up" and head.live["tokens_per_s"] == 41.25
    assert head.live["nodes"]["b"]["gpu_busy_percent"] == 85.0 and worker.live == {}
    assert view.live_table([head, worker]).splitlines()[2].startswith("  b: GPU busy 85 %")
