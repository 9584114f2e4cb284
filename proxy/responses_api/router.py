"""The HTTP face of the Responses API: ``POST /v1/responses``, ``GET`` and ``DELETE``
``/v1/responses/{id}``, ``GET /v1/responses/{id}/input_items``. Read and check the
request, hand it to the service, answer JSON for a response and server-sent events for
a stream.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from proxy.auth import authenticate
from proxy.chat.router import IDEMPOTENCY_KEY, with_mode_header
from proxy.config import LimitsSettings
from proxy.context import RequestContext
from proxy.disconnect import cancelled_on_disconnect
from proxy.errors import InvalidRequest
from proxy.http_responses import respond
from proxy.protocol.body import ON_LOOP_BYTES, check_content_parts, decode_json, read_body
from proxy.responses_api.items import parse_query
from proxy.services import services_of


async def create_response(request: Request) -> Response:
    await authenticate(request)
    services = services_of(request)
    context: RequestContext = request.state.context
    limits = services.settings.limits
    raw = await read_body(request, limits.max_body_bytes)
    header = request.headers.get("x-toolgraph-mode")
    if len(raw) <= ON_LOOP_BYTES:
        body = decode(raw, header, limits)
    else:  # off the loop: see proxy.protocol.body
        body = await asyncio.to_thread(decode, raw, header, limits)
    scope = context.tenant
    key = request.headers.get(IDEMPOTENCY_KEY)
    async with cancelled_on_disconnect(request.receive):
        answer = await services.responses.create(body, raw, context, scope, key)
    return respond(answer)


async def get_response(request: Request) -> Response:
    await authenticate(request)
    context: RequestContext = request.state.context
    scope = context.tenant
    response_id = request.path_params["response_id"]
    return respond(await services_of(request).responses.retrieve(scope, response_id, context))


async def list_input_items(request: Request) -> Response:
    await authenticate(request)
    context: RequestContext = request.state.context
    scope = context.tenant
    response_id = request.path_params["response_id"]
    query = parse_query(request.query_params)
    service = services_of(request).responses
    raw_query = request.url.query
    return respond(await service.input_items(scope, response_id, query, raw_query, context))


async def delete_response(request: Request) -> Response:
    await authenticate(request)
    context: RequestContext = request.state.context
    scope = context.tenant
    response_id = request.path_params["response_id"]
    return respond(await services_of(request).responses.delete(scope, response_id, context))


def decode(raw: bytes, mode: str | None, limits: LimitsSettings) -> Any:
    """The decoded body, within its limits: lengths and depth first, fields later."""
    body: Any = decode_json(raw, limits.max_json_depth, {"tools": limits.max_tools})
    items = body.get("input") if isinstance(body, dict) else None
    if isinstance(items, list) and len(items) > limits.max_messages:
        raise InvalidRequest(
            f"too many input items: more than {limits.max_messages} (limits.max_messages)",
            param="input",
            code="too_many_input_items",
        )
    check_content_parts(items, "input", limits.max_content_parts)
    return with_mode_header(body, mode) if mode is not None else body


routes = [
    Route("/v1/responses", create_response, methods=["POST"]),
    Route("/v1/responses/{response_id}", get_response, methods=["GET"]),
    Route("/v1/responses/{response_id}", delete_response, methods=["DELETE"]),
    Route("/v1/responses/{response_id}/input_items", list_input_items, methods=["GET"]),
]
