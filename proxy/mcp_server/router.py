"""The ``/mcp`` route: hands each request to the app's :class:`McpEndpoint`."""

from __future__ import annotations

from starlette.requests import HTTPConnection
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from proxy.services import services_of


class _Dispatch:
    """An ASGI app (a class, so that Starlette passes it the raw scope)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = services_of(HTTPConnection(scope)).mcp_endpoint
        await endpoint(scope, receive, send)


route = Route("/mcp", endpoint=_Dispatch(), methods=["GET", "POST", "DELETE"])
