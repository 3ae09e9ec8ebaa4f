"""The warm-up after every start of the head's vLLM (docs/roles/serve.md, "The warm-up"): what
the cluster user's `halo-warmup` unit runs on the head. vLLM's quadlet on the head Wants that
unit, which is bound to it (BindsTo=, After=): whatever starts vLLM (a deploy, an upgrade's
switch, the watchdog's restart, systemd's own Restart=always, a boot) starts the warm-up once,
and vLLM's stop ends it. Once /health answers 200 it sends one short completion per served model,
so that the first user request does not pay for what vLLM builds on its first one, and appends
one `warmup` line per model to the head's history with its seconds, or why it failed. It always
exits 0: a model that answers /health but no completion is a history line (and the deploy's
WARN), never a failed unit.

The deploy installs this file's text as the program and its settings beside it as JSON
(roles/serve/vllm.py): python3's standard library only, nothing of halo-cluster is installed on a
node. The deploy's wait for serving waits for it (roles/serve/services.py) and reads its lines
back (`results`)."""

from __future__ import annotations

import getpass
import json
import socket
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

EVENT = "warmup"  # the history's event
PROMPT = "Hello"  # a short prompt: a few tokens of prefill
MAX_TOKENS = 1  # one token decoded: the first step of both phases, nothing more
HEALTH_POLL_SECONDS = 1
KEY = "VLLM_API_KEY="  # secrets.env's one line (templates/serve/secrets.env.j2)
TIME = "%Y-%m-%dT%H:%M:%SZ"  # the history's time (halo_cluster/config/lock.py: now)


@dataclass(frozen=True)
class Settings:
    url: str  # vLLM's URL as the head reaches it
    models: list[str]  # the served model names, each warmed up in turn
    secrets: str  # the head's secrets.env (VLLM_API_KEY=...), below the user's home
    history: str  # the head's history (JSON Lines), below the user's home
    ready_seconds: int  # the engine's start bound (enginestart.py): /health's longest wait
    completion_seconds: int  # one completion's bound (config/serving.py, declared there)

    @classmethod
    def read(cls, path: str) -> Settings:
        return cls(**json.loads(Path(path).read_text()))


def bound(settings: Settings) -> int:
    """The whole warm-up's seconds at most: /health's wait, then each model's completion."""
    return settings.ready_seconds + len(settings.models) * settings.completion_seconds


def request_body(model: str) -> dict:
    return {"model": model, "prompt": PROMPT, "max_tokens": MAX_TOKENS, "temperature": 0}


def problem(status: int | None, body: str, model: str) -> str | None:
    """What is wrong with the answer to a warm-up completion (None: a completion of `model`)."""
    if status is None:
        return body or "no answer"
    if status != 200:
        return f"HTTP {status}: {body.strip()[:200]}"
    try:
        answer = json.loads(body)
        choices = answer["choices"]
    except (ValueError, KeyError, TypeError):
        return f"not a completion: {body.strip()[:200]}"
    if not isinstance(choices, list) or not choices:
        return "a completion without choices"
    if answer.get("model") != model:
        return f"answered by {answer.get('model')!r}, not {model}"
    return None


def line(model: str, seconds: float, why: str | None, by: str, when: str) -> dict:
    """One history line in the head's format (halo_cluster/config/lock.py: history_line)."""
    found = {"v": 1, "time": when, "event": EVENT, "run": EVENT, "by": by, "model": model}
    found |= {"seconds": round(seconds, 2), "ok": why is None}
    return found | ({"reason": why} if why else {})


def results(lines: list[str], since: str) -> list[dict]:
    """The warm-up lines of the history written at or after `since` (its time format)."""
    found = []
    for text in lines:
        try:
            event = json.loads(text)
        except ValueError:
            continue  # a torn line: the others still count
        ours = isinstance(event, dict) and event.get("event") == EVENT
        if ours and str(event.get("time", "")) >= since:
            found.append(event)
    return found


def api_key(path: str) -> str:
    """vLLM's key from secrets.env, read as text (never an argument); "" without one."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return ""
    return next((text.removeprefix(KEY) for text in lines if text.startswith(KEY)), "")


def post(url: str, body: dict, key: str, timeout: float) -> tuple[int | None, str]:
    request = urllib.request.Request(url, json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, answer.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")
    except (OSError, ValueError) as error:
        return None, f"{type(error).__name__}: {error}"


def healthy(url: str, seconds: float) -> bool:
    """/health answered 200 within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as answer:
                if answer.status == 200:
                    return True
        except (OSError, ValueError):
            pass
        time.sleep(HEALTH_POLL_SECONDS)
    return False


def record(path: str, event: dict) -> None:
    history = Path(path)
    history.parent.mkdir(parents=True, exist_ok=True)
    with history.open("a") as file:
        file.write(json.dumps(event, separators=(",", ":")) + "\n")


def main(argv: list[str]) -> int:
    settings = Settings.read(argv[1])
    by = f"{getpass.getuser()}@{socket.gethostname()}"
    home = Path.home()
    up = healthy(settings.url, settings.ready_seconds)
    for model in settings.models:
        start = time.monotonic()
        if up:
            key = api_key(str(home / settings.secrets))
            url = f"{settings.url}/v1/completions"
            status, body = post(url, request_body(model), key, settings.completion_seconds)
            why = problem(status, body, model)
        else:
            why = f"/health did not answer 200 within {settings.ready_seconds:g} s"
        seconds = time.monotonic() - start
        when = datetime.now(UTC).strftime(TIME)
        record(str(home / settings.history), line(model, seconds, why, by, when))
        said = f"warmed up {model} in {seconds:.1f} s"
        print(said if why is None else f"warning: the warm-up of {model} failed: {why}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
