"""The console's routes: its page and assets at ``/ui`` (open: they hold no data) and
the JSON it reads beyond the existing API, behind the master key like the rest of it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from pydantic import JsonValue
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from proxy import json_codec
from proxy.auth import authenticate
from proxy.console import overview
from proxy.console.catalog import CatalogView
from proxy.context import RequestContext
from proxy.errors import redact
from proxy.services import services_of

STATIC = Path(__file__).parent / "static"
#: Scripts, styles and data only from the proxy itself: nothing inline, no other origin.
_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)

router = APIRouter(prefix="/v1/toolgraph", dependencies=[Depends(authenticate)], tags=["catalog"])


@router.get("/catalog/search")
async def search_catalog(
    request: Request,
    q: Annotated[str, Query(min_length=1, max_length=2000)],
    k: Annotated[int, Query(ge=1, le=50)] = 10,
) -> Response:
    view = CatalogView(services_of(request).orchestrator.catalog)
    return _masked(request, await view.search(q, k))


@router.get("/catalog/tools/{name}")
async def get_catalog_tool(name: str, request: Request) -> Response:
    services = services_of(request)
    page = await CatalogView(services.orchestrator.catalog).tool(name)
    context: RequestContext = request.state.context  # ``authenticate`` has set it
    # what the asking client's own runs observed (never another client's)
    page["learned"] = await services.learner.edges_of(context.tenant, name)
    return _masked(request, page)


@router.get("/catalog/stats")
async def catalog_stats(request: Request) -> Response:
    view = CatalogView(services_of(request).orchestrator.catalog)
    return _masked(request, await view.stats())


@router.get("/overview")
async def get_overview(request: Request) -> Response:
    return _masked(request, overview.snapshot())


def _masked(request: Request, payload: dict[str, JsonValue]) -> Response:
    """JSON with the secrets the proxy knows masked, as in traces (a tool's endpoint
    URL may carry a key)."""
    secrets = services_of(request).settings.secrets()
    text = redact(json_codec.dumps(payload).decode(), secrets)
    return Response(text, media_type="application/json")


async def _page(request: Request) -> Response:
    headers = {"content-security-policy": _POLICY, "cache-control": "no-cache"}
    return FileResponse(STATIC / "index.html", headers=headers)


pages: list[BaseRoute] = [
    Route("/ui", _page, methods=["GET", "HEAD"]),
    Route("/ui/", _page, methods=["GET", "HEAD"]),
    Mount("/ui/static", StaticFiles(directory=STATIC), name="console"),
]
