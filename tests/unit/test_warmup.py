"""The head's warm-up (roles/serve/warmup.py) run as the unit runs it, against a real HTTP server
answering /health and /v1/completions in vLLM's shape (its CompletionResponse and its 404 for a
model it does not serve: vllm/entrypoints/openai/protocol.py, engine/serving.py _check_model;
NOT VERIFIED against a recorded answer, none is recorded), its history lines in the head's format
(config/lock.py), what the deploy says of them (warmwait.py), and the wait's shell line."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from halo_cluster.config.lock import HISTORY, history_line
from halo_cluster.config.serving import (
    SECRETS_ENV,
    WARMUP_COMPLETION_SECONDS,
    WARMUP_SEEN_SECONDS,
    warmup_after_health,
    warmup_wait,
)
from halo_cluster.roles.serve import warmup
from halo_cluster.roles.serve.warmwait import summary

SERVED = "qwen14"
KEY = "k3y with spaces, $ and 'quotes'"


class Vllm(BaseHTTPRequestHandler):
    health = 200
    seen: ClassVar[list[dict]] = []

    def answer(self, status: int, body: dict | None = None) -> None:
        data = json.dumps(body or {}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.answer(self.health if self.path == "/health" else 404)

    def do_POST(self) -> None:
        if self.headers.get("Authorization") != f"Bearer {KEY}":
            self.answer(401, {"error": "Unauthorized"})
            return
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append(request)
        if request["model"] != SERVED:
            message = f"The model `{request['model']}` does not exist."
            error = {"message": message, "type": "NotFoundError", "param": "model", "code": 404}
            self.answer(404, {"error": error})
            return
        choice = {"index": 0, "text": " world", "logprobs": None, "finish_reason": "length",
                  "stop_reason": None, "prompt_logprobs": None}  # fmt: skip
        usage = {"prompt_tokens": 1, "total_tokens": 2, "completion_tokens": 1}
        self.answer(200, {"id": "cmpl-1", "object": "text_completion", "created": 1,
                          "model": SERVED, "choices": [choice], "usage": usage})  # fmt: skip

    def log_message(self, format: str, *values: object) -> None:
        pass


@pytest.fixture
def vllm() -> Iterator[str]:
    Vllm.health, Vllm.seen = 200, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Vllm)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def run(tmp_path: Path, url: str, models: list[str], ready: int = 5) -> list[dict]:
    """The program as the unit runs it (python3 PROGRAM SETTINGS, its HOME the user's)."""
    (tmp_path / SECRETS_ENV).parent.mkdir(parents=True)
    (tmp_path / SECRETS_ENV).write_text(f"VLLM_API_KEY={KEY}\n")
    settings = {"url": url, "models": models, "secrets": SECRETS_ENV, "history": HISTORY,
                "ready_seconds": ready, "completion_seconds": 20}  # fmt: skip
    (tmp_path / "warmup.json").write_text(json.dumps(settings))
    program = Path(warmup.__file__)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    done = subprocess.run(["python3", str(program), str(tmp_path / "warmup.json")], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr  # never a failed unit
    return [json.loads(line) for line in (tmp_path / HISTORY).read_text().splitlines()]


def test_one_short_completion_per_model_each_a_history_line(tmp_path: Path, vllm: str) -> None:
    lines = run(tmp_path, vllm, [SERVED, "other"])
    assert [r["max_tokens"] for r in Vllm.seen] == [warmup.MAX_TOKENS] * 2 == [1, 1]
    assert [r["model"] for r in Vllm.seen] == [SERVED, "other"]
    ok, failed = lines
    assert (ok["event"], ok["model"], ok["ok"]) == ("warmup", SERVED, True) and "reason" not in ok
    assert 0 <= ok["seconds"] < 30
    assert failed["ok"] is False and failed["model"] == "other"
    assert failed["reason"].startswith("HTTP 404: ") and "does not exist" in failed["reason"]
    # the head's line format: the fields every line has, in history_line's order, then its own
    common = list(json.loads(history_line("warmup")))
    assert list(ok)[: len(common)] == common and ok["v"] == 1 and ok["run"] == "warmup"
    said, warnings = summary(warmup.results([json.dumps(x) for x in lines], ""), [SERVED, "other"])
    assert said.startswith(f" (warmed up: {SERVED} in ") and said.endswith(" s)")
    assert warnings == [f"the warm-up of other failed: {failed['reason']}"]


def test_no_200_from_health_within_the_bound_is_a_failed_line(tmp_path: Path, vllm: str) -> None:
    Vllm.health = 503
    (line,) = run(tmp_path, vllm, [SERVED], ready=2)
    assert line["ok"] is False and line["reason"] == "/health did not answer 200 within 2 s"
    assert Vllm.seen == []  # no completion asked of a vLLM that is not ready


def test_no_answer_at_all_is_a_failed_line(tmp_path: Path) -> None:
    (line,) = run(tmp_path, "http://127.0.0.1:9", [SERVED], ready=1)
    assert line["ok"] is False


@pytest.mark.parametrize(
    ("status", "body", "problem"),
    [
        (200, '{"model": "qwen14", "choices": [{"text": "x"}]}', None),
        (200, '{"model": "qwen14", "choices": []}', "a completion without choices"),
        (200, '{"model": "other", "choices": [{"text": "x"}]}', "answered by 'other', not qwen14"),
        (200, "<html>", "not a completion: <html>"),
        (500, '{"error": "EngineDeadError"}', 'HTTP 500: {"error": "EngineDeadError"}'),
        (None, "TimeoutError: timed out", "TimeoutError: timed out"),
    ],
)
def test_what_is_wrong_with_an_answer(status: int | None, body: str, problem: str | None) -> None:
    assert warmup.problem(status, body, SERVED) == problem


def test_only_this_starts_lines_count_and_the_last_per_model_wins() -> None:
    lines = [
        '{"event":"warmup","time":"2026-12-04T10:00:00Z","model":"m","ok":false,"reason":"old"}',
        "{torn",
        '{"event":"resolved","time":"2026-12-04T11:00:00Z"}',
        '{"event":"warmup","time":"2026-12-04T11:00:00Z","model":"m","ok":true,"seconds":2.345}',
    ]
    found = warmup.results(lines, "2026-12-04T11:00:00Z")
    assert [e["seconds"] for e in found] == [2.345]
    assert summary(found, ["m"]) == (" (warmed up: m in 2.3 s)", [])
    assert summary([], ["m"]) == ("", ["no warm-up line for m in the head's history"])


def test_the_bounds_add_up() -> None:
    settings = warmup.Settings("http://h:8000", ["a", "b"], SECRETS_ENV, HISTORY, 1800, 300)
    assert warmup.bound(settings) == 1800 + 2 * 300
    assert warmup_after_health(2) == WARMUP_SEEN_SECONDS + 2 * WARMUP_COMPLETION_SECONDS


def systemctl(tmp_path: Path, states: list[str]) -> dict[str, str]:
    """A PATH whose systemctl answers `is-active` with `states` in turn (then the last): no
    user manager runs here."""
    (tmp_path / "states").write_text("\n".join(states) + "\n")
    script = tmp_path / "systemctl"
    script.write_text(
        '#!/bin/sh\nf="$(dirname "$0")/states"\nhead -n1 "$f"\n'
        '[ "$(wc -l < "$f")" -gt 1 ] && sed -i 1d "$f"\nexit 0\n'
    )
    script.chmod(0o755)
    return {"PATH": f"{tmp_path}:{os.environ['PATH']}"}


def test_the_wait_ends_when_the_warmup_no_longer_runs(tmp_path: Path) -> None:
    env = systemctl(tmp_path, ["activating", "activating", "inactive"])
    done = subprocess.run(["sh", "-c", warmup_wait(10)], env=env, timeout=30)
    assert done.returncode == 0
    env = systemctl(tmp_path, ["activating"])
    done = subprocess.run(["sh", "-c", warmup_wait(2)], env=env, timeout=30)
    assert done.returncode == 1


def test_status_says_each_models_last_warmup() -> None:
    from halo_cluster.node.batch import Part
    from halo_cluster.tools.status import warmup as status

    older = warmup.line("m", 9.0, "HTTP 500: x", "vllm@h", "2026-12-04T10:00:00Z")
    ok = warmup.line("m", 2.31, None, "vllm@h", "2026-12-04T11:00:00Z")
    failed = warmup.line("n", 300.0, "TimeoutError: timed out", "vllm@h", "2026-12-04T11:00:05Z")
    text = "\n".join(json.dumps(e) for e in (older, ok, failed)) + "\n{torn\n"
    said = status.line(status.read({"warmup": Part(0, text.encode())}))
    assert said == (
        "warm-up: m 2.3 s at 2026-12-04T11:00:00Z; "
        "n FAILED at 2026-12-04T11:00:05Z: TimeoutError: timed out"
    )
    assert status.line(status.read({"warmup": Part(0, b"")})) == ""
    assert status.read({}) == {}  # a head not read
