"""The HTTP face of the tool registry, behind the admin key."""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Depends, Request

from proxy.errors import AuthenticationFailed, Forbidden
from proxy.http_responses import JSONResponse
from proxy.protocol.body import read_model
from proxy.registry.protocol import RegisterTools, tool_summary
from proxy.registry.service import ToolRegistry
from proxy.services import services_of

PREFIX = "/v1/toolgraph/tools"


async def require_admin(request: Request) -> None:
    admin_key = services_of(request).admin_key
    if admin_key is None:
        raise Forbidden(
            "the admin API (tool registry, MCP servers, virtual keys) is closed: set "
            "TOOLGRAPH_ADMIN_KEY to open it",
            code="registry_disabled",
        )
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), admin_key):
        raise AuthenticationFailed("the admin API needs the admin key as a bearer token")


router = APIRouter(prefix=PREFIX, dependencies=[Depends(require_admin)], tags=["tool registry"])


def _registry(request: Request) -> ToolRegistry:
    registry = services_of(request).registry
    assert registry is not None  # require_admin let the request in: an admin key is set
    return registry


@router.get("")
async def list_tools(request: Request, category: str | None = None) -> JSONResponse:
    tools = await _registry(request).list(category)
    return JSONResponse({"object": "list", "data": [tool_summary(tool) for tool in tools]})


@router.get("/{key}")
async def get_tool(key: str, request: Request) -> JSONResponse:
    return JSONResponse(tool_summary(await _registry(request).get(key)))


@router.post("")
async def register_tools(request: Request, dry_run: bool = False) -> JSONResponse:
    """Add or update tools; ``?dry_run=true`` checks them and stores nothing."""
    limits = services_of(request).settings.limits
    wanted = await read_model(request, limits, RegisterTools, "invalid_tool")
    tools, checks = await _registry(request).register(wanted, store=not dry_run)
    return JSONResponse(
        {
            "object": "list",
            "dry_run": dry_run,
            "data": [tool_summary(tool) for tool in tools],
            "checks": [{"tool": c.tool, "outcome": c.outcome, "detail": c.detail} for c in checks],
        },
        status_code=200 if dry_run else 201,
    )


@router.delete("/{key}")
async def delete_tool(key: str, request: Request) -> JSONResponse:
    tool = await _registry(request).delete(key)
    return JSONResponse(
        {"id": tool.id, "name": tool.name, "object": "tool.deleted", "deleted": True}
    )
