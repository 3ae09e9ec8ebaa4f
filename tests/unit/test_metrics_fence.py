"""The fence of vLLM's /metrics (roles/serve/metricsfence.py) as an ASGI server runs it: plain
scopes, `receive` and `send` in asyncio, no web framework. Loopback and the data link read
/metrics, the management side does not without the key; every other path passes untouched."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from halo_cluster.roles.serve.metricsfence import NETWORKS, MetricsFence

KEY = "sk-fence-key"
ENVIRON = {NETWORKS: "192.168.100.0/24", "VLLM_API_KEY": KEY}
MANAGEMENT = "10.77.0.5"


def scope(path: str, client: str, *headers: tuple[bytes, bytes], kind: str = "http") -> dict:
    """A scope as uvicorn builds it (headers as lowercased byte pairs)."""
    return {
        "type": kind,
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"head:8000"), *headers],
        "client": (client, 40000),
        "server": ("0.0.0.0", 8000),
    }


def run(app_scope: dict, environ: dict | None = None) -> tuple[list[dict], list[dict]]:
    """(what the inner app was called with, what was sent to the client)."""
    reached, sent = [], []

    async def inner(inner_scope, receive, send) -> None:
        reached.append(inner_scope)
        assert (await receive())["body"] == b"request body"  # the app's own receive
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for chunk in (b"data: 1\n\n", b"data: 2\n\n"):  # a stream, chunk by chunk
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    async def receive() -> dict:
        return {"type": "http.request", "body": b"request body", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    fence = MetricsFence(inner, ENVIRON if environ is None else environ)
    asyncio.run(fence(app_scope, receive, send))
    return reached, sent


def status(sent: list[dict]) -> int:
    return sent[0]["status"]


@pytest.mark.parametrize("client", ["127.0.0.1", "127.0.0.53", "::1", "192.168.100.2"])
def test_loopback_and_the_data_link_read_metrics(client: str) -> None:
    reached, sent = run(scope("/metrics", client))
    assert len(reached) == 1 and status(sent) == 200


@pytest.mark.parametrize("path", ["/metrics", "/metrics/", "/metrics/x", "/metricsfoo"])
def test_the_management_side_is_refused_every_path_vllms_metrics_route_matches(path: str) -> None:
    reached, sent = run(scope(path, MANAGEMENT))
    assert reached == [] and status(sent) == 403
    body = b"".join(m.get("body", b"") for m in sent[1:])
    assert body.startswith(b"403 Forbidden") and KEY.encode() not in body
    headers = dict(sent[0]["headers"])
    assert headers[b"content-type"].startswith(b"text/plain")
    assert int(headers[b"content-length"]) == len(body)


def test_the_api_key_lets_the_management_side_in() -> None:
    reached, sent = run(scope("/metrics", MANAGEMENT, (b"authorization", f"Bearer {KEY}".encode())))
    assert len(reached) == 1 and status(sent) == 200


@pytest.mark.parametrize(
    "headers",
    [
        ((b"authorization", b"Bearer sk-wrong"),),
        ((b"authorization", f"Bearer {KEY}x".encode()),),
        ((b"authorization", KEY.encode()),),
        ((b"x-api-key", KEY.encode()),),
        ((b"authorization", b"Bearer sk-wrong"), (b"authorization", f"Bearer {KEY}".encode())),
    ],
)
def test_a_wrong_or_misplaced_key_is_refused(headers) -> None:
    reached, sent = run(scope("/metrics", MANAGEMENT, *headers))
    assert reached == [] and status(sent) == 403


@pytest.mark.parametrize("header", [b"x-forwarded-for", b"forwarded"])
def test_a_forwarded_request_needs_the_key_whatever_its_address(header: bytes) -> None:
    """uvicorn's proxy headers may have made the client a header's word: only the key counts."""
    forwarded = (header, b"192.168.100.2")
    assert status(run(scope("/metrics", "127.0.0.1", forwarded))[1]) == 403
    assert status(run(scope("/metrics", "192.168.100.2", forwarded))[1]) == 403
    key = (b"authorization", f"Bearer {KEY}".encode())
    assert status(run(scope("/metrics", MANAGEMENT, forwarded, key))[1]) == 200
    assert status(run(scope("/v1/models", MANAGEMENT, forwarded))[1]) == 200  # not fenced


def test_without_a_key_only_the_networks_read_metrics() -> None:
    environ = {NETWORKS: "192.168.100.0/24"}
    refused = run(scope("/metrics", MANAGEMENT, (b"authorization", b"Bearer ")), environ)
    assert refused[0] == [] and status(refused[1]) == 403
    assert status(run(scope("/metrics", "192.168.100.1"), environ)[1]) == 200


@pytest.mark.parametrize("path", ["/v1/models", "/v1/completions", "/health", "/version", "/"])
def test_every_other_path_passes_untouched_stream_included(path: str) -> None:
    asked = scope(path, MANAGEMENT)
    reached, sent = run(asked)
    assert reached == [asked]  # the same scope, unchanged
    assert [m.get("body") for m in sent[1:]] == [b"data: 1\n\n", b"data: 2\n\n", b""]


def test_a_path_below_the_root_path_is_fenced() -> None:
    """vLLM's `--root-path`: Starlette routes /api/metrics to the metrics route."""
    asked = scope("/api/metrics", MANAGEMENT) | {"root_path": "/api"}
    assert status(run(asked)[1]) == 403


def test_an_ipv4_mapped_client_is_its_ipv4_address() -> None:
    assert status(run(scope("/metrics", "::ffff:192.168.100.2"))[1]) == 200
    assert status(run(scope("/metrics", f"::ffff:{MANAGEMENT}"))[1]) == 403


def test_no_client_address_is_refused() -> None:
    asked = scope("/metrics", MANAGEMENT) | {"client": None}
    assert status(run(asked)[1]) == 403


def test_a_websocket_to_metrics_is_closed_and_lifespan_passes() -> None:
    _, sent = run(scope("/metrics", MANAGEMENT, kind="websocket"))
    assert sent == [{"type": "websocket.close", "code": 1008}]
    reached = []

    async def inner(inner_scope, receive, send) -> None:
        reached.append(inner_scope["type"])

    asyncio.run(MetricsFence(inner, ENVIRON)({"type": "lifespan"}, None, None))
    assert reached == ["lifespan"]


def test_it_is_a_class_vllm_adds_with_add_middleware_and_fails_without_its_networks() -> None:
    """vLLM's build_app: a class goes to `app.add_middleware` (Starlette calls `cls(app)`),
    a coroutine function to `app.middleware("http")`."""
    assert inspect.isclass(MetricsFence)
    assert next(iter(inspect.signature(MetricsFence).parameters)) == "app"
    with pytest.raises(KeyError):
        MetricsFence(lambda *a: None, {"VLLM_API_KEY": KEY})
