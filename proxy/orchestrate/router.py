"""The HTTP face of orchestrate mode's traces (its requests come through the chat route)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from proxy.auth import authenticate
from proxy.context import RequestContext
from proxy.errors import NotFound
from proxy.http_responses import JSONResponse
from proxy.orchestrate.traces import TraceFilter
from proxy.services import services_of

_TRACE_ID = re.compile(r"[0-9a-f]{32}")


#: The latest traces a filtered list looks through (a filter reads no older ones).
SCAN = 500

router = APIRouter(dependencies=[Depends(authenticate)], tags=["traces"])


@router.get("/v1/toolgraph/traces")
async def list_traces(
    request: Request,
    limit: Annotated[int, Query(ge=1, le=SCAN)] = 50,
    outcome: Literal["answer", "question", "error", "cancelled"] | None = None,
    tool: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
    min_seconds: Annotated[float | None, Query(ge=0)] = None,
) -> JSONResponse:
    """Summaries of the client's latest traces, newest first; with a filter, the ones
    among its latest ``SCAN`` that pass it."""
    wanted = TraceFilter(outcome, tool, min_seconds)
    unfiltered = wanted == TraceFilter()
    store = services_of(request).orchestrator.traces
    found = await store.summaries(_tenant(request), limit if unfiltered else SCAN)
    summaries = [summary for summary in found if wanted.keeps(summary)]
    return JSONResponse({"object": "list", "data": summaries[:limit]})


@router.get("/v1/toolgraph/traces/{trace_id}")
async def get_trace(trace_id: str, request: Request) -> Response:
    store = services_of(request).orchestrator.traces
    found = _TRACE_ID.fullmatch(trace_id)
    trace = await store.get(_tenant(request), trace_id) if found else None
    if trace is None:
        raise NotFound(
            f"no trace {trace_id!r}: it expired, its request is still running, or the id is "
            "not one from an x-toolgraph-trace-id header",
            param="trace_id",
            code="trace_not_found",
        )
    return Response(trace, media_type="application/json")


def _tenant(request: Request) -> str:
    """Whose traces a request reads (``authenticate`` has set it)."""
    context: RequestContext = request.state.context
    return context.tenant
