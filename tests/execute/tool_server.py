"""A real HTTP tool service on loopback for the invocation tests (aiohttp)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp import web


@dataclass
class ToolServer:
    url: str = ""
    hits: Counter[str] = field(default_factory=Counter)
    last: dict[str, object] = field(default_factory=dict)
    gate: asyncio.Event = field(default_factory=asyncio.Event)  # /gate answers once it is set


async def _echo(request: web.Request, server: ToolServer) -> web.Response:
    server.hits[request.path] += 1
    body = await request.text()
    seen = {
        "method": request.method,
        "path": request.raw_path.split("?")[0],
        "match": dict(request.match_info),
        "query": dict(request.query),
        "headers": {k.lower(): v for k, v in request.headers.items()},
        "cookies": dict(request.cookies),
        "body": json.loads(body) if body else None,
    }
    server.last = seen
    return web.json_response({"path": seen["path"], "query": seen["query"], "body": seen["body"]})


@asynccontextmanager
async def serve_tools() -> AsyncIterator[ToolServer]:
    server = ToolServer()
    app = web.Application()

    async def echo(request: web.Request) -> web.Response:
        return await _echo(request, server)

    async def flaky(request: web.Request) -> web.Response:
        server.hits[request.path] += 1
        status = int(request.match_info["status"])
        if server.hits[request.path] <= 2:
            return web.json_response(
                {"error": "try later"}, status=status, headers={"retry-after": "0"}
            )
        return web.json_response({"ok": True, "attempt": server.hits[request.path]})

    async def big(request: web.Request) -> web.Response:
        return web.Response(body=b"x" * int(request.query["size"]), content_type="text/plain")

    async def leaky(request: web.Request) -> web.Response:
        key = request.headers.get("x-api-key", "")
        return web.json_response({"error": f"bad key {key}"}, status=401)

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound(request.query["to"])

    async def gate(request: web.Request) -> web.Response:
        await server.gate.wait()
        return web.json_response({"opened": True})

    app.router.add_route("*", "/hotels/{hotel_id}", echo)
    app.router.add_route("*", "/echo", echo)
    app.router.add_route("*", "/flaky/{status}", flaky)
    app.router.add_get("/big", big)
    app.router.add_get("/leaky", leaky)
    app.router.add_get("/redirect", redirect)
    app.router.add_get("/gate", gate)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    server.url = f"http://127.0.0.1:{port}"
    try:
        yield server
    finally:
        await runner.cleanup()
