"""GET /v1/models and /v1/models/{id}: the routing table's names, else the upstream's
own list (:class:`~proxy.relayed.models.ModelCatalog`)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from proxy.errors import NotFound
from proxy.protocol.base import dump_json
from proxy.protocol.models import ModelList
from proxy.services import services_of

router = APIRouter(tags=["models"])
_JSON = "application/json"


@router.get("/v1/models")
async def list_models(request: Request) -> Response:
    models = await services_of(request).models.models(request.state.context)
    return Response(dump_json(ModelList(object="list", data=models)), media_type=_JSON)


@router.get("/v1/models/{model:path}")
async def retrieve_model(model: str, request: Request) -> Response:
    found = await services_of(request).models.find(model, request.state.context)
    if found is None:
        raise NotFound(f"The model '{model}' does not exist", param="model", code="model_not_found")
    return Response(dump_json(found), media_type=_JSON)
