"""The fence of vLLM's `/metrics` with `serve.listen: all` (docs/roles/metrics.md, "vLLM's
/metrics and the API key"): an ASGI middleware vLLM's API server loads by `--middleware`.

Installed on the head as its own text, `halo_metrics_fence.py` (roles/serve/vllm.py), and run by
the image's Python inside vLLM: standard library only, importing nothing of this package.

vLLM checks its key on `/v1` paths only, and mounts its Prometheus app on every path starting
with `/metrics` (vllm/entrypoints/serve/instrumentator/metrics.py: `Mount("/metrics", ...)` with
`path_regex = "^/metrics(?P<path>.*)$"`); a firewall sees ports, not paths. Such a request is
answered 403 unless it comes from loopback or the cluster's data link (where the head's
Prometheus and the stall watchdog read), or carries `Authorization: Bearer KEY` with vLLM's own
key (VLLM_API_KEY, which vLLM reads too). Every other request passes through untouched, its
`receive` and `send` included (streams are never buffered).

vLLM adds each `--middleware` class with `app.add_middleware(cls)`
(vllm/entrypoints/openai/api_server.py: `build_app`), which Starlette calls as `cls(app)`; the
last added is the outermost, so this one sees a request before vLLM's own middleware."""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

# the networks let in without the key, comma-separated: the start script sets it (the data
# link's subnet). Unset, building the app fails (Starlette builds it at its first call, so vLLM
# answers every request 500): never a fence open by default
NETWORKS = "HALO_METRICS_NETWORKS"
PREFIX = "/metrics"  # every path vLLM's metrics route matches
FORWARDED = (b"x-forwarded-for", b"forwarded")
BODY = b"403 Forbidden: vLLM's /metrics is read on the cluster's data link or with its API key\n"


class MetricsFence:
    """`/metrics` for loopback, the data link's networks, or the API key; the rest untouched."""

    def __init__(self, app: App, environ: MutableMapping[str, str] | None = None) -> None:
        environ = os.environ if environ is None else environ
        self.app = app
        self.networks = networks(environ[NETWORKS])
        key = environ.get("VLLM_API_KEY") or ""
        self.bearer = f"Bearer {key}".encode() if key else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or not fenced(scope) or self.allows(scope):
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":  # closed before accepting: the server answers 403
            await send({"type": "websocket.close", "code": 1008})
        else:
            await forbid(send)

    def allows(self, scope: Scope) -> bool:
        headers = scope.get("headers", ())
        client = scope.get("client")
        # uvicorn takes the client from X-Forwarded-For when the peer is one it trusts
        # (FORWARDED_ALLOW_IPS, 127.0.0.1 by default): a forwarded request's address may be a
        # header's word, so only the key lets it in
        forwarded = any(name in FORWARDED for name, _ in headers)
        if client and not forwarded and inside(str(client[0]), self.networks):
            return True
        if self.bearer is None:
            return False
        given = [value for name, value in headers if name == b"authorization"]
        return len(given) == 1 and hmac.compare_digest(bytes(given[0]), self.bearer)


def networks(text: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """The comma-separated networks of NETWORKS, loopback's always among them."""
    found = [ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128")]
    found += [ipaddress.ip_network(part.strip()) for part in text.split(",") if part.strip()]
    return tuple(found)


def inside(host: str, allowed: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]) -> bool:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:  # a Unix socket's peer, or no address at all
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return any(address in network for network in allowed)


def fenced(scope: Scope) -> bool:
    """Whether the request reaches vLLM's metrics route: its path, or the path below FastAPI's
    `root_path` as Starlette's router matches it (`--root-path`)."""
    path = str(scope.get("path", ""))
    root = str(scope.get("root_path", ""))
    below = path[len(root) :] if root and path.startswith(root) else path
    return path.startswith(PREFIX) or below.startswith(PREFIX)


async def forbid(send: Send) -> None:
    headers = [(b"content-type", b"text/plain; charset=utf-8")]
    headers.append((b"content-length", str(len(BODY)).encode()))
    await send({"type": "http.response.start", "status": 403, "headers": headers})
    await send({"type": "http.response.body", "body": BODY})
