"""``/v1/toolgraph/mcp/servers``: the registry's MCP servers over HTTP, behind the admin key."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from proxy.config import McpServerSettings
from proxy.errors import Forbidden
from proxy.http_responses import JSONResponse
from proxy.mcp.admin import McpRegistry
from proxy.protocol.body import read_model
from proxy.registry.router import require_admin
from proxy.services import services_of

PREFIX = "/v1/toolgraph/mcp/servers"

router = APIRouter(prefix=PREFIX, dependencies=[Depends(require_admin)], tags=["MCP servers"])


def _registry(request: Request) -> McpRegistry:
    registry = services_of(request).mcp_registry
    if registry is None:  # an admin key without a graph store cannot happen; be plain anyway
        raise Forbidden("MCP servers cannot be added here", code="registry_disabled")
    return registry


@router.get("")
async def list_servers(request: Request) -> JSONResponse:
    return JSONResponse({"object": "list", "data": await _registry(request).servers()})


@router.post("")
async def add_server(request: Request, dry_run: bool = False) -> JSONResponse:
    """Add a server (the settings file's ``mcp_servers`` item shape) and connect to it;
    ``?dry_run=true`` connects once, lists its tools and keeps nothing."""
    limits = services_of(request).settings.limits
    server = await read_model(request, limits, McpServerSettings, "invalid_mcp_server")
    if dry_run:
        return JSONResponse(await _registry(request).check(server))
    return JSONResponse(await _registry(request).add(server), status_code=201)


@router.delete("/{name}")
async def remove_server(name: str, request: Request) -> JSONResponse:
    deleted = await _registry(request).remove(name)
    return JSONResponse(
        {"object": "mcp_server.deleted", "name": name, "deleted": True, "tools_deleted": deleted}
    )


@router.post("/{name}/sync")
async def sync_server(name: str, request: Request) -> JSONResponse:
    report = await _registry(request).sync(name)
    return JSONResponse(
        {
            "object": "mcp_server.sync",
            "name": name,
            "written": report.written,
            "deleted": report.deleted,
            "edges": report.edges,
            "errors": [f"{e.item}: {e.problem}" for e in report.errors],
        }
    )
