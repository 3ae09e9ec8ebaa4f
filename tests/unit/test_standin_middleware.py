"""The stand-in's `--middleware` (lab/standin/vllm_asgi.py) against vLLM's contract: imported as
build_app imports it (a failed import ends the start), the last given the outermost, each request
an ASGI scope as uvicorn's with its body through `receive`, a middleware's own answer written,
the stand-in's handler continuing otherwise; and the fence of /metrics run through it."""

from __future__ import annotations

import json
import sys
import textwrap
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from halo_cluster.roles.serve import metricsfence
from tests.unit.helpers_standin import KEY, load, one_rank, status

MIDDLEWARE = '''
SEEN = []


class Record:
    """Records each scope and the body it reads; answers /blocked itself."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        SEEN.append(("record", scope))
        if scope["method"] == "POST":
            SEEN.append(("body", (await receive())["body"]))
        if scope["path"] == "/blocked":
            await send({"type": "http.response.start", "status": 418,
                        "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"short", "more_body": True})
            await send({"type": "http.response.body", "body": b" and stout"})
            return
        await self.app(scope, receive, send)


class Outer:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        SEEN.append(("outer", scope["path"]))
        await self.app(scope, receive, send)


class Silent:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        return None


async def function(request, call_next):
    return await call_next(request)


NOT_MIDDLEWARE = 3
'''


@pytest.fixture(scope="module")
def standin() -> ModuleType:
    return load("standin_vllm_middleware")


@pytest.fixture
def mods(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    (tmp_path / "lab_mw.py").write_text(textwrap.dedent(MIDDLEWARE))
    (tmp_path / "halo_metrics_fence.py").write_text(Path(metricsfence.__file__).read_text())
    monkeypatch.syspath_prepend(str(tmp_path))  # as the start script's PYTHONPATH
    monkeypatch.setenv(metricsfence.NETWORKS, "192.168.100.0/24")
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    import lab_mw

    yield lab_mw
    for name in ("lab_mw", "halo_metrics_fence"):
        sys.modules.pop(name, None)


def serve(standin: ModuleType, *middleware: str) -> Iterator[str]:
    argv = ["serve", "/models/opt", "--served-model-name", "opt"]
    args = standin.parse([*argv, *(f"--middleware={m}" for m in middleware)])
    app = standin.build(args.middleware)
    http = standin.ThreadingHTTPServer(
        ("127.0.0.1", 0), standin.handler(args, standin.engine(args, one_rank), app)
    )
    threading.Thread(target=http.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{http.server_address[1]}"
    http.shutdown()
    http.server_close()


def test_the_scope_is_uvicorns_and_the_handler_continues(standin, mods) -> None:
    for url in serve(standin, "lab_mw.Record"):
        request = urllib.request.Request(url + "/v1/models", headers={"X-Lab": "Yes"})
        with urllib.request.urlopen(request, timeout=5) as answer:
            assert json.load(answer)["data"][0]["id"] == "opt"
        assert status(url + "/a%20b?x=1%202") == 404  # the stand-in's handler: no such path
    (what, scope), (_, query) = mods.SEEN
    assert what == "record" and scope["type"] == "http" and scope["asgi"]["version"] == "3.0"
    assert (scope["method"], scope["path"], scope["scheme"]) == ("GET", "/v1/models", "http")
    assert scope["raw_path"] == b"/v1/models" and scope["query_string"] == b""
    assert (query["path"], query["raw_path"]) == ("/a b", b"/a%20b")
    assert query["query_string"] == b"x=1%202"
    assert (b"x-lab", b"Yes") in scope["headers"]
    assert all(name == name.lower() for name, _ in scope["headers"])
    assert scope["client"][0] == "127.0.0.1" and isinstance(scope["client"][1], int)
    assert scope["server"][0] == "127.0.0.1"


def test_a_middleware_reads_the_body_and_the_handler_still_has_it(standin, mods) -> None:
    for url in serve(standin, "lab_mw.Record"):
        body = {"model": "opt", "prompt": "one two", "max_tokens": 2}
        assert status(url + "/v1/completions", body) == 200
    assert ("body", json.dumps(body).encode()) in mods.SEEN


def test_a_middlewares_own_answer_is_written_as_sent(standin, mods) -> None:
    for url in serve(standin, "lab_mw.Record"):
        try:
            urllib.request.urlopen(url + "/blocked", timeout=5)
        except urllib.error.HTTPError as error:
            assert error.code == 418 and error.read() == b"short and stout"
        else:
            raise AssertionError("/blocked answered by the handler")


def test_the_last_given_is_the_outermost(standin, mods) -> None:
    for url in serve(standin, "lab_mw.Record", "lab_mw.Outer"):
        assert status(url + "/health") == 200
    assert [what for what, _ in mods.SEEN] == ["outer", "record"]


def test_a_middleware_that_answers_nothing_is_uvicorns_500(standin, mods) -> None:
    for url in serve(standin, "lab_mw.Silent"):
        assert status(url + "/health") == 500


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("no_such_module.Fence", ImportError),
        ("lab_mw.Missing", AttributeError),
        ("lab_mw.NOT_MIDDLEWARE", ValueError),
        ("lab_mw.function", ValueError),  # vLLM's BaseHTTPMiddleware: no Starlette here
    ],
)
def test_what_vllm_cannot_load_ends_the_start(standin, mods, path: str, error) -> None:
    args = standin.parse(["serve", "/models/opt", "--middleware", path])
    with pytest.raises(error):
        standin.listen(args, standin.engine(args, one_rank))


def test_the_fence_through_the_standin(standin, mods, monkeypatch) -> None:
    """Loopback reads /metrics; the fence built without its networks ends the start."""
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    for url in serve(standin, "halo_metrics_fence.MetricsFence"):
        assert status(url + "/metrics") == 200
        assert status(url + "/v1/models") == 401  # vLLM's own key check, behind the fence
    monkeypatch.delenv(metricsfence.NETWORKS)
    with pytest.raises(KeyError):
        standin.build(["halo_metrics_fence.MetricsFence"])
