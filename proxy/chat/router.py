"""The HTTP face of chat completions: read, check, decide the mode, hand the request
to that mode's service, answer JSON for a reply and server-sent events for a stream.

The mode is decided once, here, into the request's context; the services behind
:class:`~proxy.modes.Modes` all have one shape (:class:`~proxy.modes.ChatMode`).

This is a plain Starlette route, not a FastAPI one: the body is read and checked
here anyway, and skipping FastAPI's dependency solving saves about 0.05 ms of the
1 ms the whole proxy may add to a request (measured with the ASGI app called
directly, same process, rounds interleaved).
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from proxy.auth import authenticate
from proxy.config import LimitsSettings
from proxy.context import RequestContext
from proxy.disconnect import cancelled_on_disconnect
from proxy.http_responses import respond
from proxy.modes import ChatCall
from proxy.protocol.body import ON_LOOP_BYTES, check_content_parts, decode_json, read_body
from proxy.protocol.chat import ChatCompletionRequest, parse_request
from proxy.services import services_of

IDEMPOTENCY_KEY = "idempotency-key"


async def create_chat_completion(request: Request) -> Response:
    await authenticate(request)
    services = services_of(request)
    modes = services.modes
    context: RequestContext = request.state.context
    limits = services.settings.limits
    raw = await read_body(request, limits.max_body_bytes)
    header = request.headers.get("x-toolgraph-mode")
    if len(raw) <= ON_LOOP_BYTES:
        body, chat_request = parse_body(raw, header, limits)
    else:  # in pieces, off the loop: see proxy.protocol.body
        body, chat_request = await asyncio.to_thread(parse_body, raw, header, limits, batched=True)
    mode = chat_request.resolve_mode(modes.default)  # decided here, and only here
    context.mode = mode
    service = modes.service(mode)
    call = ChatCall(chat_request, body, raw, context, request.headers.get(IDEMPOTENCY_KEY))
    async with cancelled_on_disconnect(request.receive):
        answer = await (service.stream(call) if chat_request.stream else service.complete(call))
    return respond(answer)


def parse_body(
    raw: bytes, mode: str | None, limits: LimitsSettings, batched: bool = False
) -> tuple[Any, ChatCompletionRequest]:
    """The decoded body and its checked request: lengths and depth first, fields last."""
    item_limits = {"messages": limits.max_messages, "tools": limits.max_tools}
    body = decode_json(raw, limits.max_json_depth, item_limits)
    if isinstance(body, dict):
        check_content_parts(body.get("messages"), "messages", limits.max_content_parts)
    if mode is not None:
        body = with_mode_header(body, mode)
    return body, parse_request(body, batched)


def with_mode_header(body: Any, mode: str) -> Any:
    """The ``x-toolgraph-mode`` header as ``toolgraph.mode``; the body's own field wins."""
    if not isinstance(body, dict):
        return body
    options = body.get("toolgraph")
    if options is None:
        return {**body, "toolgraph": {"mode": mode}}
    if isinstance(options, dict) and "mode" not in options:
        return {**body, "toolgraph": {**options, "mode": mode}}
    return body


routes = [Route("/v1/chat/completions", create_chat_completion, methods=["POST"])]
