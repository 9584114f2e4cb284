"""The HTTP face of learned state, behind the admin key: ``/v1/toolgraph/learning``.

``GET`` lists the tenants with learned state; ``GET /{tenant}`` exports one tenant's
(every count, by kind); ``DELETE /{tenant}`` resets it. A tenant is named by its id (32
hex digits, as the list shows it) or by a virtual key's id (``vk_…``), which names its
tenant.
"""

from __future__ import annotations

import re

from fastapi import APIRouter, Depends, Request

from proxy.errors import InvalidRequest, NotFound
from proxy.http_responses import JSONResponse
from proxy.learning.service import Learner
from proxy.registry.router import require_admin
from proxy.services import services_of

PREFIX = "/v1/toolgraph/learning"
_TENANT = re.compile(r"^[0-9a-f]{32}$")

router = APIRouter(prefix=PREFIX, dependencies=[Depends(require_admin)])


def _learner(request: Request) -> Learner:
    return services_of(request).learner


@router.get("")
async def list_tenants(request: Request) -> JSONResponse:
    learner = _learner(request)
    tenants = await learner.store.tenants()
    data = [{"tenant": t, "enabled": learner.enabled_for(t)} for t in tenants]
    return JSONResponse({"object": "list", "enabled": learner.options.enabled, "data": data})


@router.get("/{tenant}")
async def export_tenant(tenant: str, request: Request) -> JSONResponse:
    return JSONResponse(await _learner(request).export(await _tenant(tenant, request)))


@router.delete("/{tenant}")
async def reset_tenant(tenant: str, request: Request) -> JSONResponse:
    named = await _tenant(tenant, request)
    gone = await _learner(request).reset(named)
    return JSONResponse(
        {"object": "learning.state.deleted", "tenant": named, "deleted": True, "counts": gone}
    )


async def _tenant(name: str, request: Request) -> str:
    """The tenant ``name`` names: a tenant id as it is, a virtual key's its tenant."""
    if _TENANT.match(name):
        return name
    if name.startswith("vk_"):
        for key in await services_of(request).authenticator.keys.all():
            if key.id == name:
                return key.tenant
        raise NotFound(f"no virtual key {name!r}", param="tenant", code="key_not_found")
    raise InvalidRequest(
        f"{name!r} names no tenant: give a tenant id (32 hex digits) or a virtual key id (vk_…)",
        param="tenant",
        code="invalid_tenant",
    )
