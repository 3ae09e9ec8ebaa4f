"""The head's stall watchdog: what the cluster user's `halo-watchdog` service runs on the head
(`serve.watchdog_enabled`, docs/roles/serve.md "The stall watchdog"). The deploy installs this
file's text as the program and its settings beside it as JSON (roles/serve/watchdog.py): python3's
standard library only, nothing of halo-cluster is installed on a node.

vLLM's /health does not probe the engine: a rank killed or stalled mid-collective leaves it at 200
while every request waits (vllm#16259, #39863; with the native launcher until the 300 s RPC timeout
or NCCL's takes the head down alone, and a headless rank never rejoins a restarted head,
vllm#32136). So while /health is 200 the watchdog sends one short completion (one token, the API
key from the head's secrets.env in its header) every `interval`; `misses` unanswered within
`timeout` in a row, or Prometheus' `VllmGenerationStalled` alert firing when a Prometheus URL is
set (asked with the metrics role's header file when Prometheus wants its password), restart the
serving services on every node in the deploy's order, each restart a history line with its
reason, at most `restarts_per_hour` in any hour (then it holds and says so once).

The decisions (`judge`, `step`, `recent`) are pure over a `Backend`; `Node` is the real one."""

from __future__ import annotations

import getpass
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

HOUR = 3600
RESTART, HELD = "watchdog-restart", "watchdog-held"  # the history's events
ALERT = "VllmGenerationStalled"  # the metrics role's stalled-group alert
TOKENS = "vllm:generation_tokens_total"  # vLLM's counter of generated tokens (its /metrics)
STEP_SECONDS = 120  # one systemctl of a restart step (a stop waits out StopTimeout, 30-45 s)
KEY = "VLLM_API_KEY="  # secrets.env's one line (templates/serve/secrets.env.j2)


@dataclass(frozen=True)
class Settings:
    url: str  # vLLM's URL as the head reaches it
    model: str  # the served model name
    launcher: str  # ray | native
    ray: str  # the services' names (roles/serve/files.py)
    vllm: str
    workers: list[list[str]]  # [[name, ssh argv before the remote command...], ...] config order
    timeout: float  # seconds a completion may take
    interval: float  # seconds between two checks
    misses: int  # unanswered completions in a row that heal
    restarts_per_hour: int
    secrets: str  # the head's secrets.env (VLLM_API_KEY=...)
    history: str  # the head's history (JSON Lines)
    alerts: str = ""  # Prometheus' base URL, "" without metrics
    authorization: str = ""  # the file of the header Prometheus asks for, "" when it asks none
    down_seconds: float = 0  # /health not 200 this long while the head's vLLM runs heals (0: no)

    @classmethod
    def read(cls, path: str) -> Settings:
        return cls(**json.loads(Path(path).read_text()))


@dataclass(frozen=True)
class Probe:
    """One check: /health's status (None: no answer); the completion answered (True), missed
    (False) or not asked or refused (None: a 4xx is a wrong key or model, not a stall); whether
    vLLM's generated tokens advanced meanwhile (busy with others' requests, not stalled); the
    stalled-group alert firing."""

    health: int | None
    answered: bool | None = None
    progressed: bool = False
    alert: bool = False
    detail: str = ""
    running: bool = False  # the head's vLLM unit active (asked only when /health is not 200)


@dataclass
class State:
    misses: int = 0
    armed: bool = True  # the alert counts once a completion answered since the last restart
    restarts: list[float] = field(default_factory=list)  # monotonic-free: epoch seconds
    held: bool = False  # the bound was reached and said
    down_since: float | None = None  # /health not 200 while the head's vLLM ran, since then


class Backend(Protocol):
    def probe(self, alerts: bool) -> Probe: ...
    def restart(self) -> list[str]: ...
    def record(self, event: str, **fields: object) -> None: ...
    def say(self, line: str) -> None: ...


def judge(misses: int, probe: Probe, settings: Settings, armed: bool) -> tuple[int, str]:
    """The misses in a row after `probe`, and the reason to heal ("" none)."""
    if armed and probe.alert:
        return 0, f"Prometheus' alert {ALERT} fires"
    if probe.health != 200 or probe.answered is not False or probe.progressed:
        return 0, ""  # down is systemd's and the deploy's to mend; busy is not stalled
    misses += 1
    if misses < settings.misses:
        return misses, ""
    return 0, (
        f"{misses} completions in a row unanswered within {settings.timeout:g} s while /health "
        f"answers 200 ({probe.detail})"
    )


def down_reason(probe: Probe, settings: Settings, state: State, now: float) -> str:
    """The reason to heal a head whose vLLM runs but never becomes ready ("" none). With the
    native launcher a head rank that restarted alone waits for headless ranks that never rejoin
    it (vllm#32136): systemd keeps it running (or restarting), /health never answers 200."""
    if probe.health == 200 or not probe.running or not settings.down_seconds:
        state.down_since = None
        return ""
    state.down_since = now if state.down_since is None else state.down_since
    down = now - state.down_since
    if down < settings.down_seconds:
        return ""
    return (
        f"/health has not answered 200 for {down:.0f} s while the head's {settings.vllm} runs "
        f"(the bound: {settings.down_seconds:g} s): a rank waiting for one that never rejoins"
    )


def recent(times: list[float], now: float) -> list[float]:
    return [t for t in times if now - t < HOUR]


def step(backend: Backend, settings: Settings, state: State, now: float) -> str:
    """One check and what it led to: "" (nothing), "held" or "restarted"."""
    probe = backend.probe(state.armed and bool(settings.alerts))
    if probe.answered:
        state.armed = True
    state.misses, reason = judge(state.misses, probe, settings, state.armed)
    reason = reason or down_reason(probe, settings, state, now)
    if not reason:
        return ""
    state.restarts = recent(state.restarts, now)
    bound = settings.restarts_per_hour
    if len(state.restarts) >= bound:
        if not state.held:
            state.held = True
            backend.record(HELD, reason=reason, restarts=len(state.restarts), bound=bound)
            backend.say(
                f"not restarting the services: {len(state.restarts)} restarts in the last hour, "
                f"the bound (serve.watchdog_max_restarts_per_hour: {bound}); healing resumes "
                f"when the oldest is an hour old. Why now: {reason}"
            )
        return "held"
    state.held, state.armed, state.down_since = False, False, None
    state.restarts.append(now)
    backend.record(RESTART, reason=reason, launcher=settings.launcher)
    backend.say(f"restarting the serving services on every node: {reason}")
    failed = backend.restart()
    backend.say("restarted" if not failed else f"restarted, but: {'; '.join(failed)}")
    return "restarted"


def plan(settings: Settings) -> list[list[tuple[str, str]]]:
    """The restart's steps in the deploy's order, each [(node, systemctl arguments)] run at once
    on its nodes ("" is the head). Native: every rank stopped, then every rank started
    (roles/serve/ranks.py). Ray: the head's vLLM stopped, the workers' Ray, then every node's
    Ray (roles/serve/lifecycle.py), then vLLM on it."""
    workers, ray, vllm = [w[0] for w in settings.workers], settings.ray, settings.vllm
    if settings.launcher == "native":
        every = ["", *workers]
        return [[(n, f"stop {vllm}") for n in every], [(n, f"start {vllm}") for n in every]]
    return [
        [("", f"stop {vllm}")],
        [(n, f"stop {ray}") for n in workers],
        [("", f"restart {ray}"), *((n, f"start {ray}") for n in workers)],
        [("", f"start --no-block {vllm}")],
    ]


def history_times(path: str) -> list[float]:
    """The epoch seconds of the watchdog's restarts in the head's history: the bound outlives
    the service's own restarts."""
    found = []
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            event = json.loads(line)
            if isinstance(event, dict) and event.get("event") == RESTART:
                when = datetime.strptime(event["time"], "%Y-%m-%dT%H:%M:%SZ")
                found.append(when.replace(tzinfo=UTC).timestamp())
        except (ValueError, KeyError, TypeError):
            continue  # a torn line: the others still count
    return found


class Node:
    """The real back end, on the head as the cluster user."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.by = f"{getpass.getuser()}@{socket.gethostname()}"
        self.ssh = {w[0]: w[1:] for w in settings.workers}

    def get(self, url: str, timeout: float, header: str = "") -> tuple[int | None, str]:
        request = urllib.request.Request(url)
        if header:
            name, _, value = header.partition(":")
            request.add_header(name.strip(), value.strip())
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                return answer.status, answer.read().decode(errors="replace")
        except urllib.error.HTTPError as error:
            return error.code, ""
        except (OSError, ValueError):
            return None, ""

    def tokens(self) -> float | None:
        status, text = self.get(f"{self.settings.url}/metrics", 5)
        values = [line.rpartition(" ")[2] for line in text.splitlines() if line.startswith(TOKENS)]
        try:
            return sum(float(v) for v in values) if status == 200 and values else None
        except ValueError:
            return None

    def complete(self) -> tuple[bool | None, str]:
        body = {"model": self.settings.model, "prompt": "ping", "max_tokens": 1}
        request = urllib.request.Request(
            f"{self.settings.url}/v1/completions", json.dumps(body).encode(), method="POST"
        )
        request.add_header("Content-Type", "application/json")
        key = api_key(self.settings.secrets)
        if key:
            request.add_header("Authorization", f"Bearer {key}")
        start = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=self.settings.timeout) as answer:
                answer.read()
                return True, f"answered in {time.monotonic() - start:.1f} s"
        except urllib.error.HTTPError as error:
            return (None if error.code < 500 else False), f"HTTP {error.code}"
        except (OSError, ValueError) as error:
            return False, f"the last: {type(error).__name__} after {time.monotonic() - start:.0f} s"

    def alert(self) -> bool:
        query = urllib.request.quote(f'ALERTS{{alertname="{ALERT}",alertstate="firing"}}')
        header = authorization(self.settings.authorization)
        status, text = self.get(f"{self.settings.alerts}/api/v1/query?query={query}", 5, header)
        try:
            return status == 200 and bool(json.loads(text)["data"]["result"])
        except (ValueError, KeyError, TypeError):
            return False

    def probe(self, alerts: bool) -> Probe:
        health, _ = self.get(f"{self.settings.url}/health", 5)
        alert = alerts and self.alert()
        if health != 200:
            return Probe(health, alert=alert, running=self.running())
        before = self.tokens()
        answered, detail = self.complete()
        after = self.tokens() if answered is False else None
        progressed = before is not None and after is not None and after > before
        return Probe(health, answered, progressed, alert, detail)

    def running(self) -> bool:
        """The head's vLLM unit running or restarting (vLLM exits when its engine is not ready
        in time, and systemd starts it again): not stopped by a deploy or an upgrade."""
        command = ["systemctl", "--user", "is-active", self.settings.vllm]
        try:
            found = subprocess.run(command, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return found.stdout.strip() in ("active", "activating", "reloading")

    def run(self, node: str, args: str) -> subprocess.Popen:
        command = ["systemctl", "--user", *args.split()]
        if node:  # a worker, over the data link as the deploy reaches it (the launcher's key)
            command = [*self.ssh[node], " ".join(command)]
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip

    def restart(self) -> list[str]:
        failed = []
        for each in plan(self.settings):
            running = [(node, args, self.run(node, args)) for node, args in each]
            for node, args, process in running:
                try:
                    _, err = process.communicate(timeout=STEP_SECONDS)
                except subprocess.TimeoutExpired:
                    process.kill()
                    err = f"no answer after {STEP_SECONDS} s"
                if process.returncode != 0:
                    failed.append(f"{node or 'the head'}: systemctl --user {args}: {err.strip()}")
        return failed

    def record(self, event: str, **fields: object) -> None:
        """A line of the head's history in its format (halo_cluster/config/lock.py)."""
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        line = {"v": 1, "time": now, "event": event, "run": "watchdog", "by": self.by} | fields
        path = Path(self.settings.history)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as history:
            history.write(json.dumps(line, separators=(",", ":")) + "\n")

    def say(self, line: str) -> None:
        print(line, flush=True)  # the service's journal


def api_key(path: str) -> str:
    """vLLM's key from secrets.env, read as text (never an argument); "" without one."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return ""
    return next((line.removeprefix(KEY) for line in lines if line.startswith(KEY)), "")


def authorization(path: str) -> str:
    """The header line Prometheus asks for, read as text at each query (never an argument); ""
    without a file, or when it cannot be read (then Prometheus refuses the query: no alert)."""
    try:
        return Path(path).read_text().strip() if path else ""
    except OSError:
        return ""


def main(argv: list[str]) -> int:
    settings = Settings.read(argv[1])
    node = Node(settings)
    state = State(restarts=recent(history_times(settings.history), time.time()))
    node.say(
        f"watching {settings.url}: a completion every {settings.interval:g} s, "
        f"{settings.misses} unanswered within {settings.timeout:g} s restart the services"
        + (f"; and {ALERT} at {settings.alerts}" if settings.alerts else "")
    )
    while True:
        step(node, settings, state, time.time())
        time.sleep(settings.interval)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
