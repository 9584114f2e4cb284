"""Liveness, readiness and the Prometheus endpoint."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from proxy import metrics
from proxy.responses import JSONResponse
from proxy.services import services_of

router = APIRouter()


@router.get("/healthz")
async def healthz() -> JSONResponse:
    return JSONResponse({"status": "ok"})


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    results = await services_of(request).readiness.run()
    ready = all(result == "ok" for result in results.values())
    body = {"status": "ready" if ready else "not ready", "checks": results}
    return JSONResponse(body, status_code=200 if ready else 503)


@router.get("/metrics")
async def prometheus_metrics() -> Response:
    content, content_type = metrics.render()
    return Response(content, media_type=content_type)
