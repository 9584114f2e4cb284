"""Liveness, readiness and the Prometheus endpoint."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from proxy import metrics
from proxy.http_responses import JSONResponse
from proxy.services import services_of

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> JSONResponse:
    return JSONResponse({"status": "ok"})


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    readiness = services_of(request).readiness
    results = await readiness.run()
    body: dict[str, object] = {"status": _status(results), "checks": results}
    if background := readiness.states():
        body["background"] = background
    if body["status"] == "loading":  # the catalog is the one part that loads
        body["message"] = (
            "starting up: the embedding model and the tool catalog are loading; "
            "a request sent now waits for them"
        )
    return JSONResponse(body, status_code=200 if body["status"] == "ready" else 503)


def _status(results: dict[str, str]) -> str:
    if all(result == "ok" for result in results.values()):
        return "ready"
    if all(result in ("ok", "loading") for result in results.values()):
        return "loading"
    return "not ready"


@router.get("/metrics")
async def prometheus_metrics() -> Response:
    content, content_type = metrics.render()
    return Response(content, media_type=content_type)
