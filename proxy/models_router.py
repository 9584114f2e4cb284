"""GET /v1/models: the models of the routing table."""

from __future__ import annotations

from fastapi import APIRouter, Request

from proxy.errors import NotFound
from proxy.responses import JSONResponse
from proxy.services import services_of

router = APIRouter()


@router.get("/v1/models")
async def list_models(request: Request) -> JSONResponse:
    return JSONResponse({"object": "list", "data": _models(request)})


@router.get("/v1/models/{model:path}")
async def retrieve_model(model: str, request: Request) -> JSONResponse:
    for entry in _models(request):
        if entry["id"] == model:
            return JSONResponse(entry)
    raise NotFound(f"The model '{model}' does not exist", param="model", code="model_not_found")


def _models(request: Request) -> list[dict[str, object]]:
    services = services_of(request)
    return [
        {"id": name, "object": "model", "created": services.started_at, "owned_by": "toolgraph"}
        for name in services.router.names()
    ]
