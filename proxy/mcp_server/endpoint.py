"""``/mcp``: toolgraph as an MCP server (streamable HTTP), the catalog behind four tools.

An MCP client (an IDE, an agent framework, Claude Desktop) sees ``search_tools``,
``call_tool``, ``plan`` and ``run`` and reaches every catalog tool through them. The
transport is the
official SDK's, stateless with JSON answers (no session to keep between requests, so
any worker or replica answers any request); the same bearer key as ``/v1`` is
required when a master key is set. Each POSTed message's JSON-RPC envelope is checked
before the SDK reads it, and ``GET`` (a stream the stateless server would never write
to) is a 405: see :mod:`proxy.mcp_server.jsonrpc`. DNS-rebinding checks are off: a browser page
cannot send the key, and without a master key the proxy is open anyway.

:class:`McpEndpoint` is built once per app with its services and runs its session
manager for the app's lifetime (:meth:`McpEndpoint.run`); ``router.route`` finds it
through the connection's app at request time.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError as McpToolError
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import HTTPConnection, Request
from starlette.types import Message, Receive, Scope, Send

from proxy.context import RequestContext
from proxy.errors import AuthenticationFailed, RateLimited, ToolgraphError
from proxy.http_responses import error_response
from proxy.mcp_server.jsonrpc import check_body, no_stream
from proxy.mcp_server.requests import RequestTools
from proxy.mcp_server.service import CatalogTools
from proxy.protocol.body import read_body
from proxy.tenancy.callers import Authenticator

INSTRUCTIONS = (
    "toolgraph's tool catalog: call search_tools with what you need to find the tools "
    "that fit (each with its parameter schema), then call_tool with one of their names "
    "and the arguments its schema asks for. Or hand a whole request to run, which plans "
    "it over the catalog, runs the tools and answers (plan shows that plan, running nothing)."
)


class McpEndpoint:
    def __init__(
        self,
        tools: CatalogTools,
        requests: RequestTools,
        authenticator: Authenticator,
        secrets: list[str],
        max_body_bytes: int = 16 * 1024 * 1024,
    ) -> None:
        self._authenticator = authenticator
        self._secrets = secrets
        self._max_body_bytes = max_body_bytes
        server = _server(tools, requests)
        self._manager = StreamableHTTPSessionManager(
            app=server._lowlevel_server,
            stateless=True,
            json_response=True,
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        async with self._manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        connection = HTTPConnection(scope)
        authorization = connection.headers.get("authorization", "")
        peer = connection.client.host if connection.client else ""
        try:
            caller, release = await self._authenticator.admit(authorization, peer)
        except (AuthenticationFailed, RateLimited) as exc:
            await error_response(exc, self._secrets)(scope, receive, send)
            return
        context: RequestContext = connection.state.context
        context.admitted(caller, release)
        if scope["method"] == "GET":
            await no_stream()(scope, receive, send)
            return
        if scope["method"] == "POST":
            try:
                raw = await read_body(Request(scope, receive), self._max_body_bytes)
            except ToolgraphError as exc:
                await error_response(exc, self._secrets)(scope, receive, send)
                return
            refusal = check_body(raw)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
            receive = _replayed(raw, receive)
        await self._manager.asgi_app(scope, receive, send)


def _server(tools: CatalogTools, requests: RequestTools) -> MCPServer:
    server: MCPServer = MCPServer("toolgraph", instructions=INSTRUCTIONS)

    @server.tool(description="Find catalog tools for a task: the best k, with their schemas.")
    async def search_tools(ctx: Context, query: str, k: int = 10) -> str:
        scope = _caller_of(ctx).tool_scope
        return json.dumps(await _translated(tools.search(query, k, scope)))

    @server.tool(description="Run one catalog tool (a name search_tools gave) with arguments.")
    async def call_tool(ctx: Context, name: str, arguments: dict[str, Any] | None = None) -> str:
        caller = _caller_of(ctx)  # its slots, as a plan of the same client's; its key's tools
        work = tools.call(name, arguments or {}, caller.fairness, caller.tool_scope)
        output = await _translated(work)
        return output if isinstance(output, str) else json.dumps(output)

    @server.tool(
        description="Plan a request over the catalog without running anything: its sub-tasks, "
        "the tool chosen for each and why, and the calls with their dependencies."
    )
    async def plan(ctx: Context, request: str, model: str | None = None) -> str:
        return json.dumps(await _translated(requests.plan(request, model, _caller_of(ctx))))

    @server.tool(
        description="Run a request: plan it over the catalog, run the tools (in parallel where "
        "they do not depend on each other) and answer. Returns the answer and its trace id. "
        "Tools marked destructive run only with an idempotency_key (a retry with the same key "
        "gets the first answer back, nothing run twice)."
    )
    async def run(
        ctx: Context, request: str, model: str | None = None, idempotency_key: str | None = None
    ) -> str:
        work = requests.run(request, model, idempotency_key, _caller_of(ctx))
        return json.dumps(await _translated(work))

    return server


def _replayed(raw: bytes, receive: Receive) -> Receive:
    """``receive`` with the body already read handed out again, once."""
    pending = [raw]

    async def replay() -> Message:
        if pending:
            return {"type": "http.request", "body": pending.pop(), "more_body": False}
        return await receive()

    return replay


def _caller_of(ctx: Context) -> RequestContext:
    """The HTTP request's context, as :meth:`McpEndpoint.__call__` authenticated it: its
    tenant scopes the run's trace and replays, as on ``/v1``, and its key goes upstream
    when the route has no key of its own."""
    request = ctx.request_context.request
    if not isinstance(request, Request):  # not over HTTP: no client to speak of
        return RequestContext(request_id="-")
    context: RequestContext = request.state.context
    return context


async def _translated(work: Any) -> Any:
    """``work``'s result; a toolgraph error becomes the SDK's tool error, whose text
    the client sees (any other exception's stays on the server)."""
    try:
        return await work
    except ToolgraphError as exc:
        raise McpToolError(exc.message) from None
