"""``/mcp``: toolgraph as an MCP server (streamable HTTP), the catalog behind four tools.

An MCP client (an IDE, an agent framework, Claude Desktop) sees ``search_tools``,
``call_tool``, ``plan`` and ``run`` and reaches every catalog tool through them. The
transport is the
official SDK's, stateless with JSON answers (no session to keep between requests, so
any worker or replica answers any request); the same bearer key as ``/v1`` is
required when a master key is set. DNS-rebinding checks are off: a browser page
cannot send the key, and without a master key the proxy is open anyway.

:class:`McpEndpoint` is built once per app with its services and runs its session
manager for the app's lifetime (:meth:`McpEndpoint.run`); ``router.route`` finds it
through the connection's app at request time.
"""

from __future__ import annotations

import contextlib
import hmac
import json
from collections.abc import AsyncIterator
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError as McpToolError
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import HTTPConnection, Request
from starlette.types import Receive, Scope, Send

from proxy.errors import AuthenticationFailed, ToolgraphError
from proxy.mcp_server.requests import RequestTools
from proxy.mcp_server.service import CatalogTools
from proxy.responses import error_response

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
        master_key: bytes | None,
        secrets: list[str],
    ) -> None:
        self._master_key = master_key
        self._secrets = secrets
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
        problem = self._refusal(HTTPConnection(scope))
        if problem is not None:
            await error_response(problem, self._secrets)(scope, receive, send)
            return
        await self._manager.asgi_app(scope, receive, send)

    def _refusal(self, connection: HTTPConnection) -> AuthenticationFailed | None:
        if self._master_key is None:
            return None
        scheme, _, token = connection.headers.get("authorization", "").partition(" ")
        token = token.strip() if scheme.lower() == "bearer" else ""
        if not token:
            return AuthenticationFailed("Send the API key as 'Authorization: Bearer YOUR_KEY'.")
        if not hmac.compare_digest(token.encode(), self._master_key):
            return AuthenticationFailed("Incorrect API key provided.")
        return None


def _server(tools: CatalogTools, requests: RequestTools) -> MCPServer:
    server: MCPServer = MCPServer("toolgraph", instructions=INSTRUCTIONS)

    @server.tool(description="Find catalog tools for a task: the best k, with their schemas.")
    async def search_tools(query: str, k: int = 10) -> str:
        return json.dumps(await _translated(tools.search(query, k)))

    @server.tool(description="Run one catalog tool (a name search_tools gave) with arguments.")
    async def call_tool(name: str, arguments: dict[str, Any] | None = None) -> str:
        output = await _translated(tools.call(name, arguments or {}))
        return output if isinstance(output, str) else json.dumps(output)

    @server.tool(
        description="Plan a request over the catalog without running anything: its sub-tasks, "
        "the tool chosen for each and why, and the calls with their dependencies."
    )
    async def plan(ctx: Context, request: str, model: str | None = None) -> str:
        return json.dumps(await _translated(requests.plan(request, model, _key_of(ctx))))

    @server.tool(
        description="Run a request: plan it over the catalog, run the tools (in parallel where "
        "they do not depend on each other) and answer. Returns the answer and its trace id. "
        "Tools marked destructive run only with an idempotency_key (a retry with the same key "
        "gets the first answer back, nothing run twice)."
    )
    async def run(
        ctx: Context, request: str, model: str | None = None, idempotency_key: str | None = None
    ) -> str:
        work = requests.run(request, model, idempotency_key, _key_of(ctx))
        return json.dumps(await _translated(work))

    return server


def _key_of(ctx: Context) -> str | None:
    """The bearer key the client sent (/v1 keeps it the same way: it scopes traces and
    replays, and goes upstream when the route has no key of its own)."""
    request = ctx.request_context.request
    if not isinstance(request, Request):
        return None
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


async def _translated(work: Any) -> Any:
    """``work``'s result; a toolgraph error becomes the SDK's tool error, whose text
    the client sees (any other exception's stays on the server)."""
    try:
        return await work
    except ToolgraphError as exc:
        raise McpToolError(exc.message) from None
