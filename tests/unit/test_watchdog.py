"""The stall watchdog (roles/serve/stallwatch.py): its decisions over an in-memory back end, and
its real back end against a real HTTP server on this machine answering as vLLM and Prometheus."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from halo_cluster.node.batch import Part
from halo_cluster.roles.serve import stallwatch
from halo_cluster.roles.serve.stallwatch import HOUR, Probe, Settings, State, judge, plan, step
from halo_cluster.tools.status import watchdog

SETTINGS = Settings(
    url="http://127.0.0.1:1",
    model="m",
    launcher="native",
    ray="halo-ray",
    vllm="halo-vllm",
    workers=[["192.168.100.2", "ssh", "vllm@192.168.100.2"]],
    timeout=2,
    interval=1,
    misses=3,
    restarts_per_hour=2,
    secrets="/nonexistent",
    history="/nonexistent",
)
MISSED = Probe(200, answered=False, detail="the last: TimeoutError after 2 s")
ANSWERED = Probe(200, answered=True)


@dataclass
class Memory:
    """The in-memory back end: the probes to give, what it recorded, said and restarted."""

    probes: list[Probe]
    records: list[tuple[str, dict]] = field(default_factory=list)
    said: list[str] = field(default_factory=list)
    restarts: int = 0
    alerts_asked: list[bool] = field(default_factory=list)

    def probe(self, alerts: bool) -> Probe:
        self.alerts_asked.append(alerts)
        return self.probes.pop(0)

    def restart(self) -> list[str]:
        self.restarts += 1
        return []

    def record(self, event: str, **fields: object) -> None:
        self.records.append((event, fields))

    def say(self, line: str) -> None:
        self.said.append(line)


def run(backend: Memory, settings: Settings = SETTINGS, state: State | None = None,
        start: float = 10_000.0, every: float = 1.0) -> list[str]:  # fmt: skip
    state = state or State()
    return [step(backend, settings, state, start + i * every) for i in range(len(backend.probes))]


def test_misses_in_a_row_heal_and_an_answer_resets_them() -> None:
    assert judge(0, MISSED, SETTINGS, True) == (1, "")
    assert judge(1, MISSED, SETTINGS, True) == (2, "")
    misses, reason = judge(2, MISSED, SETTINGS, True)
    assert misses == 0
    assert reason.startswith("3 completions in a row unanswered within 2 s")
    assert "TimeoutError" in reason
    assert judge(2, ANSWERED, SETTINGS, True) == (0, "")


@pytest.mark.parametrize(
    "probe",
    [
        Probe(503),  # down: systemd's Restart= and the deploy's to mend, never a stall
        Probe(None),  # no answer from /health at all
        Probe(200, answered=None, detail="HTTP 401"),  # a wrong key is not a stall
        Probe(200, answered=False, progressed=True),  # busy with others' requests
    ],
)
def test_what_is_not_a_miss(probe: Probe) -> None:
    assert judge(2, probe, SETTINGS, True) == (0, "")


def test_the_alert_heals_at_once_but_only_once_armed() -> None:
    firing = Probe(200, answered=True, alert=True)
    assert judge(0, firing, SETTINGS, True)[1] == "Prometheus' alert VllmGenerationStalled fires"
    assert judge(0, replace(firing, answered=False), SETTINGS, False) == (1, "")


def test_a_stall_restarts_once_with_its_reason_in_the_history() -> None:
    backend = Memory([ANSWERED, MISSED, MISSED, MISSED, Probe(503), ANSWERED])
    assert run(backend) == ["", "", "", "restarted", "", ""]
    assert backend.restarts == 1
    [(event, fields)] = backend.records
    assert event == "watchdog-restart" and fields["launcher"] == "native"
    assert str(fields["reason"]).startswith("3 completions in a row unanswered")


def test_a_head_that_runs_but_never_becomes_ready_is_restarted_after_the_ready_bound() -> None:
    """A native head rank restarted alone waits for headless ranks that never rejoin it
    (vllm#32136): its unit active, /health never 200. Stopped (a deploy's, an upgrade's) or
    answering 200 again, it is left alone; the bound counts from the first such check."""
    bounded = replace(SETTINGS, down_seconds=5)
    waiting = Probe(None, running=True)
    backend = Memory([waiting] * 5 + [Probe(None), waiting] + [waiting] * 6)
    done = run(backend, settings=bounded)
    assert done.index("restarted") == 11 and done.count("restarted") == 1
    [(event, fields)] = backend.records
    assert event == "watchdog-restart"
    assert str(fields["reason"]).startswith("/health has not answered 200 for 5 s while the head")
    assert run(Memory([waiting] * 10), settings=SETTINGS) == [""] * 10  # 0: never
    back = Memory([waiting] * 4 + [ANSWERED] + [waiting] * 4)
    assert "restarted" not in run(back, settings=bounded)


def test_the_bound_per_hour_holds_and_says_so_once_then_resumes() -> None:
    state = State()
    backend = Memory([MISSED] * 12)
    done = run(backend, state=state)  # a check a second: 4 stalls within the hour
    assert done.count("restarted") == 2 and done.count("held") == 2
    assert [e for e, _ in backend.records] == ["watchdog-restart"] * 2 + ["watchdog-held"]
    held = backend.records[-1][1]
    assert held["restarts"] == 2 and held["bound"] == 2
    assert sum("not restarting" in line for line in backend.said) == 1
    later = Memory([MISSED] * 3)
    assert run(later, state=state, start=10_000.0 + HOUR + 1)[-1] == "restarted"


def test_restarts_read_back_from_the_history_count_against_the_bound(tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    lines = [
        {"v": 1, "time": "2026-12-02T14:00:00Z", "event": "watchdog-restart", "reason": "x"},
        {"v": 1, "time": "2026-12-02T14:10:00Z", "event": "resolved"},
        {"v": 1, "time": "2026-12-02T14:20:00Z", "event": "watchdog-restart", "reason": "y"},
    ]
    history.write_text("\n".join(json.dumps(x) for x in lines) + "\n{torn\n")
    times = stallwatch.history_times(str(history))
    assert [time.strftime("%H:%M", time.gmtime(t)) for t in times] == ["14:00", "14:20"]
    state = State(restarts=times)
    backend = Memory([MISSED] * 3)
    assert run(backend, state=state, start=times[1] + 60)[-1] == "held"


def test_the_alert_is_asked_only_with_a_prometheus_and_once_armed() -> None:
    backend = Memory([MISSED] * 3 + [Probe(200)])
    run(backend, settings=replace(SETTINGS, alerts="http://127.0.0.1:9090"))
    assert backend.alerts_asked == [True, True, True, False]  # disarmed by the restart
    quiet = Memory([ANSWERED])
    run(quiet)
    assert quiet.alerts_asked == [False]


def test_the_restart_follows_the_deploys_order() -> None:
    native = plan(SETTINGS)
    assert native == [
        [("", "stop halo-vllm"), ("192.168.100.2", "stop halo-vllm")],
        [("", "start halo-vllm"), ("192.168.100.2", "start halo-vllm")],
    ]
    ray = plan(replace(SETTINGS, launcher="ray"))
    assert ray == [
        [("", "stop halo-vllm")],
        [("192.168.100.2", "stop halo-ray")],
        [("", "restart halo-ray"), ("192.168.100.2", "start halo-ray")],
        [("", "start --no-block halo-vllm")],
    ]


# --- the real back end against a real HTTP server ---------------------------------------------


class Fake:
    """What the server answers: vLLM's /health, /metrics, /v1/completions; Prometheus' query."""

    def __init__(self) -> None:
        self.health = 200
        self.hang = 0.0  # seconds a completion takes
        self.tokens = 10.0
        self.firing = False
        self.headers: list[str] = []
        self.asked: list[str | None] = []  # the Authorization of each query Prometheus had


def handler(fake: Fake) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def reply(self, status: int, body: str) -> None:
            self.send_response(status)
            self.end_headers()
            self.wfile.write(body.encode())

        def do_GET(self) -> None:
            if self.path == "/health":
                self.reply(fake.health, "")
            elif self.path == "/metrics":
                self.reply(200, f'vllm:generation_tokens_total{{model_name="m"}} {fake.tokens}\n')
            elif self.path.startswith("/api/v1/query?query="):
                assert "VllmGenerationStalled" in self.path
                fake.asked.append(self.headers.get("Authorization"))
                result = [{"metric": {"alertname": "VllmGenerationStalled"}}] if fake.firing else []
                self.reply(200, json.dumps({"status": "success", "data": {"result": result}}))
            else:
                self.reply(404, "")

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            fake.headers.append(self.headers.get("Authorization", ""))
            time.sleep(fake.hang)
            self.reply(200, '{"choices": [{"text": "x"}]}')

    return Handler


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Fake, stallwatch.Node]]:
    fake = Fake()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(fake))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    secrets = tmp_path / "secrets.env"
    secrets.write_text("VLLM_API_KEY=s3cret=with=equals\n")
    settings = replace(SETTINGS, url=url, alerts=url, timeout=1, secrets=str(secrets),
                       history=str(tmp_path / "state" / "history.jsonl"))  # fmt: skip
    yield fake, stallwatch.Node(settings)
    server.shutdown()


def test_a_real_completion_answers_with_the_key_in_its_header(served) -> None:
    fake, node = served
    probe = node.probe(alerts=True)
    assert (probe.health, probe.answered, probe.alert) == (200, True, False)
    assert fake.headers == ["Bearer s3cret=with=equals"]


def test_the_alert_query_sends_the_header_file_read_at_each_query_and_none_without(
    served, tmp_path: Path
) -> None:
    """metrics.listen: all: the metrics role's 0600 header file, read as text at each query (a
    new password without a restart), in no argument; listen: data: no file named, none sent."""
    fake, node = served
    fake.firing = True
    assert node.alert() and fake.asked == [None]
    header = tmp_path / "prometheus-authorization"
    header.write_text("Authorization: Basic aGFsbzpvbGQ=\n")
    guarded = stallwatch.Node(replace(node.settings, authorization=str(header)))
    assert guarded.alert()
    header.write_text("Authorization: Basic aGFsbzpuZXc=\n")  # the deploy wrote a new one
    assert guarded.alert()
    assert fake.asked == [None, "Basic aGFsbzpvbGQ=", "Basic aGFsbzpuZXc="]
    header.unlink()  # not written yet: asked without, Prometheus would refuse: no alert
    assert guarded.alert() and fake.asked[-1] is None


def test_a_hanging_completion_is_a_miss_unless_tokens_advanced(served) -> None:
    fake, node = served
    fake.hang = 1.5
    probe = node.probe(alerts=False)
    assert probe.answered is False and not probe.progressed
    assert "after 1 s" in probe.detail

    def busy() -> None:  # another client's tokens counted while the probe waits
        time.sleep(0.5)
        fake.tokens += 5

    threading.Thread(target=busy).start()
    assert node.probe(alerts=False).progressed


def test_health_not_200_asks_no_completion_and_the_alert_is_read(served) -> None:
    fake, node = served
    fake.health, fake.firing = 503, True
    probe = node.probe(alerts=True)
    assert (probe.health, probe.answered, probe.alert) == (503, None, True)
    assert fake.headers == []


def test_the_history_line_is_the_heads_format(served) -> None:
    _, node = served
    node.record("watchdog-restart", reason="why", launcher="native")
    [line] = Path(node.settings.history).read_text().splitlines()
    event = json.loads(line)
    assert list(event)[:5] == ["v", "time", "event", "run", "by"]
    assert event["event"] == "watchdog-restart" and event["reason"] == "why"
    assert stallwatch.history_times(node.settings.history)


def test_status_says_the_last_restart_and_why() -> None:
    line = json.dumps({"time": "2026-12-02T14:00:00Z", "event": "watchdog-restart", "reason": "r"})
    found = {"watchdog": Part(0, b"active\n"), "watchdog_last": Part(0, line.encode() + b"\n")}
    said = watchdog.line(watchdog.read(found))
    assert said == "watchdog: active; last restart 2026-12-02T14:00:00Z: r"
    held = line.replace("watchdog-restart", "watchdog-held").encode()
    found = {"watchdog": Part(3, b"inactive\n"), "watchdog_last": Part(0, held)}
    assert watchdog.line(watchdog.read(found)).startswith("watchdog: inactive; holding")
    none = {"watchdog": Part(0, b"active\n"), "watchdog_last": Part(1)}
    assert watchdog.line(watchdog.read(none)) == "watchdog: active; no restart yet"
    assert watchdog.line(watchdog.read({})) == ""


def test_the_program_runs_alone_from_its_text(served, tmp_path: Path) -> None:
    """As the node runs it: its text copied, python3 in isolated mode (no package importable),
    /health answering 503 (nothing to do): it says what it watches and keeps running."""
    fake, node = served
    fake.health = 503
    program = tmp_path / "watchdog.py"
    program.write_text(Path(stallwatch.__file__).read_text())
    settings = tmp_path / "watchdog.json"
    settings.write_text(json.dumps(asdict(node.settings)))
    argv = ["python3", "-I", str(program), str(settings)]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = process.stdout.readline() if process.stdout else ""
        time.sleep(2)
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
    finally:
        process.kill()
        process.wait()
    assert first.startswith(f"watching {node.settings.url}: a completion every 1 s, 3 unanswered")
    assert not Path(node.settings.history).exists()  # nothing recorded: nothing healed


def test_the_names_it_shares_are_the_same_everywhere() -> None:
    """stallwatch.py runs alone on the head (its text is the program: it imports nothing of the
    tool) and the tools import no role, so the names they share are written in each: tied here."""
    from halo_cluster.roles.metrics import queries
    from halo_cluster.roles.serve.watchdog import WATCHDOG

    assert watchdog.WATCHDOG == WATCHDOG
    assert watchdog.RESTART == stallwatch.RESTART
    assert stallwatch.HELD.startswith("watchdog-")  # status reads every "watchdog-" event
    assert stallwatch.TOKENS in queries.vllm_names()  # the counter vLLM exposes
    rules = Path(stallwatch.__file__).parents[2] / "templates" / "metrics" / "alerts.yml.j2"
    assert f"- alert: {stallwatch.ALERT}\n" in rules.read_text()
