"""The stand-in's `--middleware` (lab only): each request of its http.server handler run through
the ASGI middleware vLLM would load, with vLLM's contract and nothing kinder.

- Loading: as vllm/entrypoints/openai/api_server.py's `build_app` (vLLM 0.33.0): each import
  path split at its last dot, `importlib.import_module`, then `getattr`; a class is added with
  `app.add_middleware(cls)`, so Starlette calls `cls(app)` and the last added is the outermost; a
  coroutine function would be `app.middleware("http")` (Starlette's BaseHTTPMiddleware, which the
  stand-in has no Starlette for: refused, one line); anything else is vLLM's ValueError. An
  import that fails ends the start, as it ends vLLM's. The stand-in builds the middleware when
  it starts listening, Starlette at the first call: a class that fails to build fails the
  stand-in's start, where vLLM would answer every request 500.
- Each request: the scope uvicorn gives (vllm/entrypoints/launcher.py serves with uvicorn), the
  request's body through `receive` (and still there for the handler afterwards), the response
  a middleware sends itself written as it sends it. The innermost app means "the stand-in's own
  handler continues": it answers after the chain returns, so a middleware that wraps `send` to
  change an answer of vLLM's own does not see the stand-in's (ours passes it through)."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import io
import urllib.parse
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from http.server import BaseHTTPRequestHandler
from typing import Any

App = Callable[[dict, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Any]
# the requests whose chain reached the innermost app: set per request inside its event loop
_REACHED: ContextVar[list[bool]] = ContextVar("reached")


async def _standin(scope: dict, receive: Callable, send: Callable) -> None:
    """The innermost app: the stand-in's own handler continues once the chain returns."""
    _REACHED.get().append(True)


def build(paths: list[str]) -> App | None:
    """The middleware stack over the stand-in's handler, or None without `--middleware`."""
    if not paths:
        return None
    app: App = _standin
    for path in paths:
        module_path, object_name = path.rsplit(".", 1)
        imported = getattr(importlib.import_module(module_path), object_name)
        if inspect.isclass(imported):
            app = imported(app)
        elif inspect.iscoroutinefunction(imported):
            raise ValueError(f"{path}: the stand-in runs class middleware only (no Starlette)")
        else:
            raise ValueError(f"Invalid middleware {path}. Must be a function or a class.")
    return app


def scope(handler: BaseHTTPRequestHandler) -> dict:
    """The request as uvicorn's http scope (uvicorn/protocols/http/h11_impl.py)."""
    raw, _, query = handler.path.partition("?")
    client, server = handler.client_address, handler.server.server_address
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": handler.request_version.removeprefix("HTTP/"),
        "server": (str(server[0]), int(server[1])),
        "client": (str(client[0]), int(client[1])),
        "scheme": "http",
        "method": handler.command,
        "root_path": "",
        "path": urllib.parse.unquote(raw),
        "raw_path": raw.encode("latin-1"),
        "query_string": query.encode("latin-1"),
        "headers": [
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in handler.headers.items()
        ],
    }


def passes(app: App, handler: BaseHTTPRequestHandler) -> bool:
    """Run one request through the stack: True when the stand-in's handler continues, False when
    the middleware answered (or ended without an answer: uvicorn's 500)."""
    reached: list[bool] = []
    started: list[bool] = []
    read: list[bool] = []

    async def receive() -> dict:
        if read:  # the body was given: what follows is the client going away
            return {"type": "http.disconnect"}
        read.append(True)
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        handler.rfile = io.BytesIO(body)  # the handler still reads it
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            started.append(True)
            handler.send_response(message["status"])
            for name, value in message.get("headers", ()):
                handler.send_header(name.decode("latin-1"), value.decode("latin-1"))
            handler.end_headers()
        elif message["type"] == "http.response.body":
            handler.wfile.write(message.get("body", b""))
            handler.wfile.flush()

    async def call() -> None:
        _REACHED.set(reached)
        await app(scope(handler), receive, send)

    asyncio.run(call())
    if started:
        return False
    if reached:
        return True
    handler.send_error(500, "ASGI callable returned without starting response")
    return False
