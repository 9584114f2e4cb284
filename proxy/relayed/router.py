"""The HTTP face of the relayed routes: ``POST /v1/embeddings``, ``/v1/completions``
and ``/v1/moderations``, one route each, all made by :func:`relayed_route`.

Authentication, the body's limits, request ids and metrics are chat's: the same
functions, the same middleware. Plain Starlette routes, like chat's.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from proxy.auth import authenticate
from proxy.disconnect import cancelled_on_disconnect
from proxy.http_responses import respond
from proxy.modes import Answer
from proxy.protocol.body import decode_body, read_body
from proxy.protocol.relayed import ENDPOINTS, Endpoint
from proxy.relayed.service import RelayedCall
from proxy.services import services_of


def relayed_route(endpoint: Endpoint) -> Route:
    """``POST /v1{endpoint.path}``: check the request, relay it, answer as the upstream did."""

    async def relay(request: Request) -> Response:
        await authenticate(request)
        services = services_of(request)
        limits = services.settings.limits
        raw = await read_body(request, limits.max_body_bytes)
        body = await decode_body(raw, limits)
        call = RelayedCall(endpoint, endpoint.parse(body), body, raw, request.state.context)
        call.context.mode = "passthrough"
        service = services.relayed
        answer: Answer
        async with cancelled_on_disconnect(request.receive):
            if call.request.streams:
                answer = await service.stream(call)
            else:
                answer = await service.complete(call)
        return respond(answer)

    return Route(f"/v1{endpoint.path}", relay, methods=["POST"])


routes = [relayed_route(endpoint) for endpoint in ENDPOINTS]
