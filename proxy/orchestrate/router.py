"""The HTTP face of orchestrate mode's traces (its requests come through the chat route)."""

from __future__ import annotations

import re

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from proxy.auth import authenticate
from proxy.errors import NotFound
from proxy.services import services_of

_TRACE_ID = re.compile(r"[0-9a-f]{32}")


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
