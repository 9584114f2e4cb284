"""GET /v1/models: the models of the routing table."""

from __future__ import annotations

from fastapi import APIRouter, Request

from proxy.errors import NotFound
from proxy.responses import JSONResponse

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
    created: int = request.app.state.started_at
    return [
        {"id": name, "object": "model", "created": created, "owned_by": "toolgraph"}
        for name in request.app.state.router.names()
    ]
