"""The HTTP face of orchestrate mode: the chat route's orchestrate branch and traces."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from proxy.auth import authenticate
from proxy.context import RequestContext
from proxy.disconnect import cancelled_on_disconnect
from proxy.errors import NotFound
from proxy.orchestrate.idempotency import HEADER, REPLAYED, Stored
from proxy.protocol.chat import ChatCompletionRequest
from proxy.services import services_of
from proxy.streaming import EventStreamResponse

_TRACE_ID = re.compile(r"[0-9a-f]{32}")


async def orchestrate(
    request: Request,
    chat_request: ChatCompletionRequest,
    body: dict[str, object],
    raw: bytes,
    context: RequestContext,
) -> Response:
    orchestrator = services_of(request).orchestrator
    turn = orchestrator.start(chat_request, body, context)
    claim = None
    if (key := request.headers.get(HEADER)) is not None:
        found = await orchestrator.claim(turn, key, raw)
        if isinstance(found, Stored):
            return replay(found)
        claim = found
    if chat_request.stream:
        return EventStreamResponse(orchestrator.stream(turn, claim), turn.headers)
    async with cancelled_on_disconnect(request.receive):
        reply = await orchestrator.complete(turn, claim)
    return Response(reply.content, media_type="application/json", headers=reply.headers)


def replay(stored: Stored) -> Response:
    headers = {**stored.headers, REPLAYED: "true"}
    if stored.events is not None:
        return EventStreamResponse(_events(stored.events), headers)
    return Response(
        stored.body, status_code=stored.status, media_type="application/json", headers=headers
    )


async def _events(events: list[bytes]) -> AsyncIterator[bytes]:
    for event in events:
        yield event


router = APIRouter(dependencies=[Depends(authenticate)])


@router.get("/v1/toolgraph/traces/{trace_id}")
async def get_trace(trace_id: str, request: Request) -> Response:
    orchestrator = services_of(request).orchestrator
    trace = await orchestrator.traces.get(trace_id) if _TRACE_ID.fullmatch(trace_id) else None
    if trace is None:
        raise NotFound(
            f"no trace {trace_id!r}: it expired, its request is still running, or the id is "
            "not one from an x-toolgraph-trace-id header",
            param="trace_id",
            code="trace_not_found",
        )
    return Response(trace, media_type="application/json")
